//! The rendezvous store hosted by a launcher, as torchrun's agent hosts it: the ranks join it as
//! clients (`TORCHELASTIC_USE_AGENT_STORE=True`), so the launcher can bind the port itself, keep
//! it for the whole job and leave no moment in which another process could take it.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::group::{address_in_use, take_error};

unsafe extern "C" {
    fn runfn_c10d_host_store(
        port: c_int,
        timeout_ms: i64,
        bound: *mut c_int,
        out: *mut *mut c_void,
    ) -> *mut c_char;
    fn runfn_c10d_free_store(store: *mut c_void);
}

/// A TCPStore server on this host, alive until dropped.
#[derive(Debug)]
pub struct HostedStore {
    raw: NonNull<c_void>,
    port: u16,
}

// SAFETY: the store only serves clients from its own threads; the handle is freed once in Drop.
unsafe impl Send for HostedStore {}

impl HostedStore {
    /// Listens on `port`, or on a port the system picks when it is 0.
    pub fn host(port: u16, timeout: Duration) -> Result<HostedStore> {
        let mut bound: c_int = 0;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `bound` and `raw` are written by the shim; `raw` is an owned handle on success.
        let result = unsafe {
            runfn_c10d_host_store(
                c_int::from(port),
                timeout.as_millis().min(i64::MAX as u128) as i64,
                &mut bound,
                &mut raw,
            )
        };
        take_error(result).map_err(|message| {
            let explained = if address_in_use(&message) {
                format!(
                    "port {port} is already in use on this host: cannot host the rendezvous there; \
                     pick another --master-port or leave it out (c10d: {message})"
                )
            } else {
                format!("cannot host the rendezvous on port {port}: {message}")
            };
            // A port held by another job, like a peer that never came, may be free later.
            let marker = runfn_core::EnvironmentFailed::new(runfn_core::Cause::Rendezvous);
            anyhow::Error::new(marker).context(explained)
        })?;
        let raw = NonNull::new(raw).ok_or_else(|| anyhow!("c10d returned no store"))?;
        let port = u16::try_from(bound)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| anyhow!("c10d reported port {bound} for the rendezvous store"))?;
        Ok(HostedStore { raw, port })
    }

    /// The port the ranks connect to.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for HostedStore {
    fn drop(&mut self) {
        // SAFETY: the handle came from runfn_c10d_host_store and is freed once.
        unsafe { runfn_c10d_free_store(self.raw.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{Backend, GroupOptions, ProcessGroup};
    use crate::launch::Launch;
    use tch::{Device, Tensor};

    #[test]
    fn ranks_join_a_hosted_store_on_a_port_the_system_picked() {
        let store = HostedStore::host(0, Duration::from_secs(20)).unwrap();
        let port = store.port();
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                std::thread::spawn(move || {
                    let launch = Launch {
                        rank,
                        world: 2,
                        local_rank: rank,
                        local_world: 2,
                        master_addr: "127.0.0.1".into(),
                        master_port: port,
                        agent_store: true,
                    };
                    let options = GroupOptions {
                        backend: Backend::Gloo,
                        timeout: Duration::from_secs(20),
                        gloo_ifname: None,
                        gloo_threads: 1,
                        device: Device::Cpu,
                    };
                    let group = ProcessGroup::connect(&launch, &options).unwrap();
                    let t = Tensor::from_slice(&[rank as f64 + 1.0]);
                    group.allreduce_sum(std::slice::from_ref(&t)).unwrap();
                    t.double_value(&[0])
                })
            })
            .collect();
        for rank in ranks {
            assert_eq!(rank.join().unwrap(), 3.0);
        }
        drop(store);
    }

    #[test]
    fn a_taken_port_is_named() {
        let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = HostedStore::host(port, Duration::from_secs(2)).expect_err("the port is taken");
        assert!(
            err.to_string()
                .contains(&format!("port {port} is already in use")),
            "{err}"
        );
    }
}
