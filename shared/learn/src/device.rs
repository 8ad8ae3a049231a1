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
/// libtorch. It is looked for beside the `libtorch_cpu.so` this process loaded (the install the
/// binary was built against), then on the usual search path. The CPU-only install lacks it,
/// which is reported plainly.
fn load_cuda() -> Result<(), String> {
    let mut tried = Vec::new();
    let mut candidates = Vec::new();
    if let Some(dir) = loaded_libtorch_dir() {
        candidates.push(format!("{dir}/libtorch_cuda.so"));
    }
    candidates.push("libtorch_cuda.so".to_string());
    for candidate in candidates {
        match dlopen_global(&candidate) {
            Ok(()) => return Ok(()),
            Err(reason) => tried.push(reason),
        }
    }
    Err(format!(
        "--device cuda: cannot load libtorch_cuda.so ({}); this build uses the CPU-only libtorch: \
         build with LIBTORCH=$(scripts/setup-libtorch.sh --cuda) to train on a GPU",
        tried.join("; ")
    ))
}

fn dlopen_global(name: &str) -> Result<(), String> {
    let c_name = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a valid NUL-terminated name; the handle is kept for the process.
    let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(dl_error());
    }
    Ok(())
}

/// The folder of the already loaded `libtorch_cpu.so`.
fn loaded_libtorch_dir() -> Option<String> {
    // SAFETY: RTLD_NOLOAD only returns a handle to a library already in the process.
    let handle = unsafe {
        libc::dlopen(
            c"libtorch_cpu.so".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_NOLOAD,
        )
    };
    if handle.is_null() {
        return None;
    }
    let mut origin = [0 as libc::c_char; libc::PATH_MAX as usize];
    // SAFETY: RTLD_DI_ORIGIN writes a NUL-terminated path of at most PATH_MAX bytes.
    let ok = unsafe { libc::dlinfo(handle, libc::RTLD_DI_ORIGIN, origin.as_mut_ptr().cast()) };
    // SAFETY: the handle came from dlopen above.
    unsafe { libc::dlclose(handle) };
    if ok != 0 {
        return None;
    }
    // SAFETY: dlinfo succeeded, so `origin` holds a NUL-terminated string.
    let dir = unsafe { std::ffi::CStr::from_ptr(origin.as_ptr()) };
    Some(dir.to_string_lossy().into_owned())
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local C string or null.
    unsafe {
        let err = libc::dlerror();
        if err.is_null() {
            "unknown error".to_string()
        } else {
            std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned()
        }
    }
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
