//! `--device cpu|cuda|cuda:N`. CUDA is loaded only when asked for: the binary links libtorch's
//! CPU library alone, and `libtorch_cuda.so` is opened at run time, so one binary serves both
//! and a machine without a GPU gets a clean error instead of a failed start.

use tch::Device;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    Cpu,
    Cuda(usize),
}

impl DeviceChoice {
    pub fn parse(text: &str) -> Result<DeviceChoice, String> {
        match text {
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            _ => match text.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(DeviceChoice::Cuda(n)),
                _ => Err(format!(
                    "`{text}`: expected cpu, cuda or cuda:N (N a device number)"
                )),
            },
        }
    }

    /// Loads CUDA when asked for and checks the device exists.
    pub fn open(self) -> Result<Device, String> {
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Cuda(n) => {
                load_cuda()?;
                let count = tch::Cuda::device_count();
                if count <= 0 {
                    return Err("--device cuda: libtorch's CUDA library loaded, but no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES)".into());
                }
                if n as i64 >= count {
                    return Err(format!(
                        "--device cuda:{n}: only {count} CUDA device(s) visible"
                    ));
                }
                Ok(Device::Cuda(n))
            }
        }
    }
}

impl std::fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceChoice::Cpu => write!(f, "cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// Opens `libtorch_cuda.so` with its symbols global, which registers the CUDA backend with
/// libtorch. It is found through the binary's rpath (the libtorch build it was linked with) or
/// `LD_LIBRARY_PATH`; the CPU-only install lacks it, which is reported plainly.
fn load_cuda() -> Result<(), String> {
    let name = c"libtorch_cuda.so";
    // SAFETY: dlopen with a valid NUL-terminated name; the handle is kept for the process.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local C string or null.
        let reason = unsafe {
            let err = libc::dlerror();
            if err.is_null() {
                "unknown error".to_string()
            } else {
                std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned()
            }
        };
        return Err(format!(
            "--device cuda: cannot load libtorch_cuda.so ({reason}); this build uses the CPU-only libtorch, \
             build with the full CUDA install (scripts/setup-libtorch.sh --cuda) to train on a GPU"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices() {
        assert_eq!(DeviceChoice::parse("cpu"), Ok(DeviceChoice::Cpu));
        assert_eq!(DeviceChoice::parse("cuda"), Ok(DeviceChoice::Cuda(0)));
        assert_eq!(DeviceChoice::parse("cuda:3"), Ok(DeviceChoice::Cuda(3)));
        assert!(DeviceChoice::parse("gpu").is_err());
        assert!(DeviceChoice::parse("cuda:x").is_err());
    }
}
