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

/// The version of the libtorch this process loaded: the `build-version` file of its install
/// (`<install>/lib/libtorch_cpu.so` beside `<install>/build-version`, in both the libtorch zip
/// and the Python wheel). tch exposes no version call.
/// Runs scoring on `threads` threads: libtorch's intra-op pool and the global rayon pool that
/// reading and profiling use (a rayon pool already built keeps its size).
pub fn limit_threads(threads: usize) {
    tch::set_num_threads(i32::try_from(threads).unwrap_or(i32::MAX));
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
}

pub fn libtorch_version() -> Option<String> {
    let dir = loaded_libtorch_dir()?;
    let install = std::path::Path::new(&dir).parent()?;
    let text = std::fs::read_to_string(install.join("build-version")).ok()?;
    Some(text.trim().to_string()).filter(|v| !v.is_empty())
}

/// A CUDA device's name and memory, and the most of its memory seen in use while training.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuUse {
    pub name: String,
    pub memory_bytes: u64,
    /// Device memory in use (by every process on the device: the CUDA runtime reports no
    /// per-process figure), sampled every 50 ms. libtorch's caching allocator keeps what it
    /// reserved, so this is close to the run's own peak on a device it has to itself.
    pub peak_memory_used_bytes: u64,
}

/// Samples a CUDA device's memory in use on a thread of its own until `finish`. Uses the CUDA
/// runtime that `libtorch_cuda.so` brought into the process, through `dlsym`, so the binary
/// needs no CUDA library to build or to run on CPU.
#[derive(Debug)]
pub struct GpuMonitor {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<Option<GpuUse>>,
}

type MemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> libc::c_int;
type SetDevice = unsafe extern "C" fn(libc::c_int) -> libc::c_int;
type GetDeviceProperties = unsafe extern "C" fn(*mut u8, libc::c_int) -> libc::c_int;

struct CudaRuntime {
    mem_get_info: MemGetInfo,
    set_device: SetDevice,
    get_properties: Option<GetDeviceProperties>,
}

impl CudaRuntime {
    fn find() -> Option<CudaRuntime> {
        let symbol = |name: &std::ffi::CStr| {
            // SAFETY: dlsym over the global scope with a NUL-terminated name.
            let ptr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!ptr.is_null()).then_some(ptr)
        };
        let mem_get_info = symbol(c"cudaMemGetInfo")?;
        let set_device = symbol(c"cudaSetDevice")?;
        // CUDA 12 renamed the call; the struct's first field is the name in every version.
        let get_properties =
            symbol(c"cudaGetDeviceProperties_v2").or_else(|| symbol(c"cudaGetDeviceProperties"));
        // SAFETY: the CUDA runtime's documented C signatures.
        unsafe {
            Some(CudaRuntime {
                mem_get_info: std::mem::transmute::<*mut libc::c_void, MemGetInfo>(mem_get_info),
                set_device: std::mem::transmute::<*mut libc::c_void, SetDevice>(set_device),
                get_properties: get_properties
                    .map(|p| std::mem::transmute::<*mut libc::c_void, GetDeviceProperties>(p)),
            })
        }
    }

    /// (free, total) bytes.
    fn memory(&self) -> Option<(u64, u64)> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: cudaMemGetInfo writes two size_t values.
        let status = unsafe { (self.mem_get_info)(&mut free, &mut total) };
        (status == 0).then_some((free as u64, total as u64))
    }

    fn name(&self, device: usize) -> String {
        let Some(get_properties) = self.get_properties else {
            return String::new();
        };
        // cudaDeviceProp is about 1 KB and grows between versions; 8 KB leaves room.
        let mut props = vec![0u8; 8192];
        // SAFETY: the buffer is larger than any cudaDeviceProp; the name is its first 256 bytes.
        let status = unsafe { get_properties(props.as_mut_ptr(), device as libc::c_int) };
        if status != 0 {
            return String::new();
        }
        let name = &props[..256];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    }
}

impl GpuMonitor {
    /// Starts sampling `choice` when it is a CUDA device; `None` on CPU or without the runtime.
    pub fn start(choice: DeviceChoice) -> Option<GpuMonitor> {
        let DeviceChoice::Cuda(device) = choice else {
            return None;
        };
        let runtime = CudaRuntime::find()?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let sampler = std::thread::spawn(move || {
            // SAFETY: selects the device for this thread; libtorch already made its context.
            if unsafe { (runtime.set_device)(device as libc::c_int) } != 0 {
                return None;
            }
            let name = runtime.name(device);
            let (mut peak, mut total) = (0, 0);
            loop {
                if let Some((free, all)) = runtime.memory() {
                    total = all;
                    peak = peak.max(all.saturating_sub(free));
                }
                if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Some(GpuUse {
                name,
                memory_bytes: total,
                peak_memory_used_bytes: peak,
            })
        });
        Some(GpuMonitor { stop, sampler })
    }

    /// Stops sampling (after one last sample) and returns what was seen.
    pub fn finish(self) -> Option<GpuUse> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().ok().flatten()
    }
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
    fn reads_the_loaded_libtorch_version() {
        // Nothing from tch ran yet in this test, so load libtorch the way any tensor does.
        let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
        let version = libtorch_version().expect("a build-version beside the loaded libtorch");
        assert!(
            version.split('.').count() >= 2 && version.starts_with(|c: char| c.is_ascii_digit()),
            "{version}"
        );
    }

    #[test]
    fn no_gpu_monitor_on_cpu() {
        assert!(GpuMonitor::start(DeviceChoice::Cpu).is_none());
    }

    #[test]
    fn parses_devices() {
        assert_eq!(DeviceChoice::parse("cpu"), Ok(DeviceChoice::Cpu));
        assert_eq!(DeviceChoice::parse("cuda"), Ok(DeviceChoice::Cuda(0)));
        assert_eq!(DeviceChoice::parse("cuda:3"), Ok(DeviceChoice::Cuda(3)));
        assert!(DeviceChoice::parse("gpu").is_err());
        assert!(DeviceChoice::parse("cuda:x").is_err());
    }
}
