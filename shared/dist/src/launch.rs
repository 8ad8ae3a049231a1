//! The launch contract shared by torchrun, Slurm wrappers and Kubernetes training operators:
//! every rank gets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR` and
//! `MASTER_PORT` in its environment.

/// Where this process sits in a distributed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    pub local_world: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// torchrun's agent already hosts the TCPStore on MASTER_PORT
    /// (`TORCHELASTIC_USE_AGENT_STORE=True`), so rank 0 joins it as a client.
    pub agent_store: bool,
}

impl Launch {
    /// `Ok(None)` when the environment names no distributed job (neither `RANK` nor
    /// `WORLD_SIZE` set); an error naming the variable when it is incomplete or malformed.
    pub fn from_env() -> Result<Option<Launch>, String> {
        Launch::from_vars(|name| std::env::var(name).ok())
    }

    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, String> {
        let (rank, world) = (get("RANK"), get("WORLD_SIZE"));
        if rank.is_none() && world.is_none() {
            return Ok(None);
        }
        let number = |name: &str, value: Option<String>| -> Result<usize, String> {
            let value = value.ok_or_else(|| {
                format!("{name} is not set, but RANK or WORLD_SIZE is: a distributed launch sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT")
            })?;
            value
                .trim()
                .parse()
                .map_err(|_| format!("{name}={value:?} is not a non-negative integer"))
        };
        let rank = number("RANK", rank)?;
        let world = number("WORLD_SIZE", world)?;
        if world == 0 {
            return Err("WORLD_SIZE=0: a job has at least one rank".into());
        }
        if rank >= world {
            return Err(format!(
                "RANK={rank} is not below WORLD_SIZE={world} (ranks are 0..{})",
                world - 1
            ));
        }
        let local_rank = match get("LOCAL_RANK") {
            Some(v) => number("LOCAL_RANK", Some(v))?,
            None => rank,
        };
        let local_world = match get("LOCAL_WORLD_SIZE") {
            Some(v) => number("LOCAL_WORLD_SIZE", Some(v))?,
            None => world,
        };
        if local_world == 0 || local_rank >= local_world {
            return Err(format!(
                "LOCAL_RANK={local_rank} is not below LOCAL_WORLD_SIZE={local_world}"
            ));
        }
        let master_addr = get("MASTER_ADDR").filter(|a| !a.trim().is_empty()).ok_or(
            "MASTER_ADDR is not set: the address of rank 0's host (127.0.0.1 for one machine)",
        )?;
        let port = number("MASTER_PORT", get("MASTER_PORT"))?;
        let master_port = u16::try_from(port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("MASTER_PORT={port} is not a TCP port (1..65535)"))?;
        let agent_store =
            get("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Ok(Some(Launch {
            rank,
            world,
            local_rank,
            local_world,
            master_addr: master_addr.trim().to_string(),
            master_port,
            agent_store,
        }))
    }

    /// The variables a launcher sets for one rank of a job on this machine.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("RANK", self.rank.to_string()),
            ("WORLD_SIZE", self.world.to_string()),
            ("LOCAL_RANK", self.local_rank.to_string()),
            ("LOCAL_WORLD_SIZE", self.local_world.to_string()),
            ("MASTER_ADDR", self.master_addr.clone()),
            ("MASTER_PORT", self.master_port.to_string()),
        ];
        if self.agent_store {
            env.push(("TORCHELASTIC_USE_AGENT_STORE", "True".into()));
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> Result<Option<Launch>, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Launch::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn no_variables_is_a_single_process() {
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn torchrun_environment() {
        let launch = parse(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((launch.rank, launch.world), (3, 8));
        assert_eq!((launch.local_rank, launch.local_world), (1, 2));
        assert_eq!(
            (launch.master_addr.as_str(), launch.master_port),
            ("node0", 29500)
        );
        assert!(launch.agent_store);
        let env = launch.env();
        assert!(env.contains(&("RANK", "3".into())));
        assert!(env.contains(&("LOCAL_WORLD_SIZE", "2".into())));
        assert!(env.contains(&("TORCHELASTIC_USE_AGENT_STORE", "True".into())));
    }

    #[test]
    fn local_values_default_to_the_global_ones() {
        let launch = parse(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "1234"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((launch.local_rank, launch.local_world), (1, 2));
        assert!(!launch.agent_store);
    }

    #[test]
    fn errors_name_the_variable() {
        let base = [("MASTER_ADDR", "h"), ("MASTER_PORT", "1")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v: Vec<(&str, &str)> = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v).unwrap_err()
        };
        assert!(with(&[("RANK", "0")]).contains("WORLD_SIZE is not set"));
        assert!(with(&[("RANK", "2"), ("WORLD_SIZE", "2")]).contains("RANK=2 is not below"));
        assert!(with(&[("RANK", "x"), ("WORLD_SIZE", "2")]).contains("RANK=\"x\""));
        assert!(with(&[("RANK", "0"), ("WORLD_SIZE", "0")]).contains("WORLD_SIZE=0"));
        assert!(
            parse(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")])
                .unwrap_err()
                .contains("MASTER_ADDR")
        );
        assert!(
            parse(&[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "70000")
            ])
            .unwrap_err()
            .contains("MASTER_PORT=70000")
        );
    }
}
