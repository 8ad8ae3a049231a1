//! A c10d process group: rendezvous through a TCPStore, then ProcessGroupGloo (CPU tensors) or
//! ProcessGroupNCCL (CUDA tensors), driven through the C++ shim in `csrc/c10d_shim.cpp`.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt;
use std::ptr::NonNull;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use tch::Tensor;
use tch::{Device, Kind};

use crate::launch::Launch;

/// `at::Tensor*`, as `tch::Tensor::as_ptr` hands it out.
type AtTensor = c_void;

unsafe extern "C" {
    fn runfn_c10d_has_nccl() -> c_int;
    fn runfn_c10d_free_error(message: *mut c_char);
    fn runfn_c10d_quiet_logs();
    fn runfn_c10d_connect(
        addr: *const c_char,
        port: c_int,
        rank: c_int,
        world: c_int,
        timeout_ms: i64,
        backend: c_int,
        store_server: c_int,
        ifname: *const c_char,
        gloo_threads: c_int,
        out: *mut *mut c_void,
    ) -> *mut c_char;
    fn runfn_c10d_free(group: *mut c_void);
    fn runfn_c10d_broadcast(group: *mut c_void, tensor: *mut AtTensor, root: c_int) -> *mut c_char;
    fn runfn_c10d_allreduce_sum(
        group: *mut c_void,
        tensors: *mut *mut AtTensor,
        n: c_int,
    ) -> *mut c_char;
    fn runfn_c10d_allgather(
        group: *mut c_void,
        input: *mut AtTensor,
        outputs: *mut *mut AtTensor,
        world: c_int,
    ) -> *mut c_char;
    fn runfn_c10d_barrier(group: *mut c_void) -> *mut c_char;
}

/// The collective backend: Gloo moves CPU tensors over TCP, NCCL moves CUDA tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Gloo,
    Nccl,
}

impl Backend {
    /// NCCL for CUDA devices, Gloo for the CPU (the choice torch.distributed documents).
    pub fn for_device(device: Device) -> Backend {
        match device {
            Device::Cuda(_) => Backend::Nccl,
            _ => Backend::Gloo,
        }
    }

    pub fn parse(text: &str) -> Result<Backend, String> {
        match text {
            "gloo" => Ok(Backend::Gloo),
            "nccl" => Ok(Backend::Nccl),
            other => Err(format!("unknown backend `{other}` (expected gloo or nccl)")),
        }
    }

    /// Whether this build includes ProcessGroupNCCL (built against the CUDA libtorch with
    /// RUNFN_NCCL=1).
    pub fn nccl_built() -> bool {
        // SAFETY: a constant query with no arguments.
        unsafe { runfn_c10d_has_nccl() != 0 }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        })
    }
}

/// How to join: backend, collective and rendezvous timeout, and Gloo's network interface.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    pub backend: Backend,
    pub timeout: Duration,
    /// `GLOO_SOCKET_IFNAME`: the interface Gloo binds on a multi-homed host.
    pub gloo_ifname: Option<String>,
    /// Gloo's worker threads; one keeps the cores for libtorch's own threads.
    pub gloo_threads: usize,
    /// Where collective tensors live: the CPU for Gloo, this rank's GPU for NCCL.
    pub device: Device,
}

/// One rank's membership in a process group. Collectives block until every rank joined them
/// or the timeout passed; a rank that died makes its peers' collectives fail.
pub struct ProcessGroup {
    raw: NonNull<c_void>,
    pub rank: usize,
    pub world: usize,
    pub backend: Backend,
    device: Device,
}

impl fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("backend", &self.backend)
            .finish()
    }
}

// SAFETY: the c10d backend is thread-safe; the handle is only used through &self methods that
// call into it, and freed once in Drop.
unsafe impl Send for ProcessGroup {}
unsafe impl Sync for ProcessGroup {}

/// Takes ownership of a shim error: `Ok` for null, else the message.
pub(crate) fn take_error(message: *mut c_char) -> Result<(), String> {
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: non-null results are NUL-terminated strings malloc'd by the shim.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .trim()
        .to_string();
    // SAFETY: freed exactly once, by the shim's allocator.
    unsafe { runfn_c10d_free_error(message) };
    Err(text)
}

impl ProcessGroup {
    /// Rendezvous at MASTER_ADDR:MASTER_PORT and create the group. Rank 0 hosts the store
    /// (unless torchrun's agent does) and waits for every rank up to the timeout.
    pub fn connect(launch: &Launch, options: &GroupOptions) -> Result<ProcessGroup> {
        if options.backend == Backend::Nccl && !Backend::nccl_built() {
            bail!(
                "the nccl backend is not in this build: build train against the CUDA libtorch with RUNFN_NCCL=1 \
                 (scripts/setup-libtorch.sh --cuda), or use --dist-backend gloo"
            );
        }
        let addr = CString::new(launch.master_addr.as_str())
            .map_err(|_| anyhow!("MASTER_ADDR contains a NUL byte"))?;
        let ifname = options
            .gloo_ifname
            .as_deref()
            .map(CString::new)
            .transpose()
            .map_err(|_| anyhow!("GLOO_SOCKET_IFNAME contains a NUL byte"))?;
        let server = launch.rank == 0 && !launch.agent_store;
        // SAFETY: sets one of libtorch's logging flags; no other thread uses c10d yet.
        unsafe { runfn_c10d_quiet_logs() };
        let mut raw = std::ptr::null_mut();
        // SAFETY: the strings outlive the call; `raw` receives an owned handle on success.
        let result = unsafe {
            runfn_c10d_connect(
                addr.as_ptr(),
                c_int::from(launch.master_port),
                launch.rank as c_int,
                launch.world as c_int,
                options.timeout.as_millis().min(i64::MAX as u128) as i64,
                match options.backend {
                    Backend::Gloo => 0,
                    Backend::Nccl => 1,
                },
                c_int::from(server),
                ifname.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                options.gloo_threads.max(1) as c_int,
                &mut raw,
            )
        };
        let at = format!("{}:{}", launch.master_addr, launch.master_port);
        take_error(result).map_err(|message| {
            // Where it failed says what failed: the ranks could not form their group, which a
            // later attempt may do (exit 4), whatever c10d's words were.
            let marker = runfn_core::EnvironmentFailed::new(runfn_core::Cause::Rendezvous);
            anyhow::Error::new(marker).context(explain_connect(&message, launch, &at, options))
        })?;
        let raw = NonNull::new(raw).ok_or_else(|| anyhow!("c10d returned no process group"))?;
        Ok(ProcessGroup {
            raw,
            rank: launch.rank,
            world: launch.world,
            backend: options.backend,
            device: options.device,
        })
    }

    /// Overwrites `tensor` on every rank with rank `root`'s.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<()> {
        // SAFETY: the tensor outlives the blocking call.
        let result = unsafe {
            runfn_c10d_broadcast(
                self.raw.as_ptr(),
                tensor.as_ptr() as *mut AtTensor,
                root as c_int,
            )
        };
        take_error(result).map_err(|m| self.lost("broadcast", m))
    }

    /// Sums every tensor across ranks in place: one collective per tensor, all in flight at
    /// once. The tensors must be contiguous and on the backend's device.
    pub fn allreduce_sum(&self, tensors: &[Tensor]) -> Result<()> {
        let mut ptrs: Vec<*mut AtTensor> = tensors
            .iter()
            .map(|t| t.as_ptr() as *mut AtTensor)
            .collect();
        // SAFETY: the tensors outlive the blocking call.
        let result = unsafe {
            runfn_c10d_allreduce_sum(self.raw.as_ptr(), ptrs.as_mut_ptr(), ptrs.len() as c_int)
        };
        take_error(result).map_err(|m| self.lost("all-reduce", m))
    }

    /// Every rank's `tensor`, in rank order.
    pub fn allgather(&self, tensor: &Tensor) -> Result<Vec<Tensor>> {
        let outputs: Vec<Tensor> = (0..self.world).map(|_| tensor.empty_like()).collect();
        let mut ptrs: Vec<*mut AtTensor> = outputs
            .iter()
            .map(|t| t.as_ptr() as *mut AtTensor)
            .collect();
        // SAFETY: input and outputs outlive the blocking call; outputs has `world` entries.
        let result = unsafe {
            runfn_c10d_allgather(
                self.raw.as_ptr(),
                tensor.as_ptr() as *mut AtTensor,
                ptrs.as_mut_ptr(),
                self.world as c_int,
            )
        };
        take_error(result).map_err(|m| self.lost("all-gather", m))?;
        Ok(outputs)
    }

    pub fn barrier(&self) -> Result<()> {
        // SAFETY: the handle is live.
        let result = unsafe { runfn_c10d_barrier(self.raw.as_ptr()) };
        take_error(result).map_err(|m| self.lost("barrier", m))
    }

    /// Sends rank 0's bytes to every rank (length first, then the bytes).
    pub fn broadcast_bytes(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        let device = self.device();
        let len = Tensor::from_slice(&[bytes.len() as i64]).to_device(device);
        self.broadcast(&len, 0)?;
        let n = len.int64_value(&[0]);
        let buffer = if self.rank == 0 {
            Tensor::from_slice(bytes).to_device(device)
        } else {
            Tensor::zeros([n], (Kind::Uint8, device))
        };
        self.broadcast(&buffer, 0)?;
        let buffer = buffer.to_device(Device::Cpu);
        let mut out = vec![0u8; n as usize];
        buffer.copy_data(&mut out, n as usize);
        Ok(out)
    }

    /// The device collective tensors live on.
    pub fn device(&self) -> Device {
        self.device
    }

    fn lost(&self, what: &str, message: String) -> anyhow::Error {
        anyhow!(
            "rank {} of {}: {what} failed, a peer rank has likely exited or hung: {message}",
            self.rank,
            self.world
        )
    }
}

/// Whether a c10d error says the store's port was taken (its wording differs by socket backend).
pub(crate) fn address_in_use(message: &str) -> bool {
    let lower = message.to_lowercase();
    lower.contains("eaddrinuse") || lower.contains("address already in use")
}

/// A rendezvous failure in words: a port already taken or peers that never came are the
/// common ones, and c10d's own message is kept after the explanation.
fn explain_connect(message: &str, launch: &Launch, at: &str, options: &GroupOptions) -> String {
    let lower = message.to_lowercase();
    if address_in_use(message) {
        format!(
            "MASTER_PORT {} is already in use on this host: rank 0 cannot host the rendezvous at {at}; \
             pick a free port (c10d: {message})",
            launch.master_port
        )
    } else if lower.contains("timed out") || lower.contains("timeout") {
        format!(
            "rank {} of {}: the rendezvous at {at} timed out after {:.0} s: not every rank joined \
             (check that all {} ranks were started with the same MASTER_ADDR and MASTER_PORT) (c10d: {message})",
            launch.rank,
            launch.world,
            options.timeout.as_secs_f64(),
            launch.world
        )
    } else {
        format!(
            "rank {} of {}: cannot join the process group at {at}: {message}",
            launch.rank, launch.world
        )
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: the handle came from runfn_c10d_connect and is freed once.
        unsafe { runfn_c10d_free(self.raw.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::Buckets;

    /// A port that was free a moment ago, for rank 0 to host the store on.
    fn free_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    fn launch(rank: usize, world: usize, port: u16) -> Launch {
        Launch {
            rank,
            world,
            local_rank: rank,
            local_world: world,
            master_addr: "127.0.0.1".into(),
            master_port: port,
            agent_store: false,
        }
    }

    fn options(timeout_ms: u64) -> GroupOptions {
        GroupOptions {
            backend: Backend::Gloo,
            timeout: Duration::from_millis(timeout_ms),
            gloo_ifname: None,
            gloo_threads: 1,
            device: Device::Cpu,
        }
    }

    /// Runs `body(group)` on `world` ranks, one thread each, and returns their results in rank order.
    fn on_ranks<T: Send + 'static>(
        world: usize,
        body: impl Fn(ProcessGroup) -> T + Send + Sync + Copy + 'static,
    ) -> Vec<T> {
        let port = free_port();
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                std::thread::spawn(move || {
                    let group = ProcessGroup::connect(&launch(rank, world, port), &options(20_000))
                        .unwrap();
                    body(group)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn collectives_over_gloo() {
        let results = on_ranks(3, |group| {
            let rank = group.rank as f64;
            // Broadcast: every rank ends with rank 0's values.
            let t = Tensor::from_slice(&[rank + 1.0, rank * 10.0]);
            group.broadcast(&t, 0).unwrap();
            let broadcast: Vec<f64> = Vec::try_from(&t).unwrap();
            // Bucketed mean: 5 elements in buckets of 2.
            let mut grad = Tensor::from_slice(&[rank as f32; 5]);
            Buckets::new(5, 4, 8).average(&group, &mut grad).unwrap();
            let mean: Vec<f32> = Vec::try_from(&grad).unwrap();
            // A plain sum of f64 values.
            let side = Tensor::from_slice(&[1.0f64]);
            group.allreduce_sum(std::slice::from_ref(&side)).unwrap();
            let gathered: Vec<i64> = group
                .allgather(&Tensor::from_slice(&[group.rank as i64 * 7]))
                .unwrap()
                .iter()
                .map(|t| t.int64_value(&[0]))
                .collect();
            let bytes = group
                .broadcast_bytes(if group.rank == 0 { b"from rank 0" } else { b"" })
                .unwrap();
            group.barrier().unwrap();
            (broadcast, mean, side.double_value(&[0]), gathered, bytes)
        });
        for (broadcast, mean, side, gathered, bytes) in results {
            assert_eq!(broadcast, vec![1.0, 0.0]);
            assert_eq!(mean, vec![1.0; 5]);
            assert_eq!(side, 3.0);
            assert_eq!(gathered, vec![0, 7, 14]);
            assert_eq!(bytes, b"from rank 0");
        }
    }

    #[test]
    fn a_missing_peer_times_out_with_a_clear_error() {
        let port = free_port();
        let started = std::time::Instant::now();
        let err = ProcessGroup::connect(&launch(0, 2, port), &options(1500)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("timed out") && text.contains("not every rank joined"),
            "{text}"
        );
        assert_eq!(
            runfn_core::retryable::cause_of(&err),
            Some(runfn_core::Cause::Rendezvous),
            "a failed rendezvous is the environment's (exit 4)"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_port_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = ProcessGroup::connect(&launch(0, 2, port), &options(1500)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("MASTER_PORT {port} is already in use")),
            "{text}"
        );
    }

    #[test]
    fn nccl_without_it_in_the_build_is_refused() {
        if Backend::nccl_built() {
            return;
        }
        let mut o = options(1000);
        o.backend = Backend::Nccl;
        let err = ProcessGroup::connect(&launch(0, 1, 1), &o).unwrap_err();
        assert!(
            err.to_string()
                .contains("nccl backend is not in this build"),
            "{err}"
        );
    }
}
