#!/bin/bash
# A one-machine Slurm cluster for tests, on the loopback address: munge, slurmctld and one slurmd
# (a node of this machine's cores), every file under DIR. Needs root and Debian's slurm-wlm and
# munge (installed with apt-get when missing).
#   scripts/slurm/test-cluster.sh start DIR   # prints SLURM_CONF=DIR/slurm.conf once it is idle
#   scripts/slurm/test-cluster.sh stop DIR    # stops the daemons it started, by their pids
# One node, not two: a second slurmd needs its own host name and address (a network namespace
# with its own UTS name), which this script does not make.
set -euo pipefail
command=${1:?usage: test-cluster.sh start|stop DIR}
dir=${2:?usage: test-cluster.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

stop() {
  for daemon in slurmd slurmctld munged; do
    if [[ -f $dir/$daemon.pid ]]; then
      pid=$(cat "$dir/$daemon.pid")
      kill "$pid" 2> /dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2> /dev/null || true
      rm -f "$dir/$daemon.pid"
    fi
  done
}

if [[ $command == stop ]]; then
  stop
  exit 0
fi
if [[ $command != start ]]; then
  echo "test-cluster: unknown command \`$command\` (start or stop)" >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "test-cluster: needs root (slurmd runs jobs as their users)" >&2
  exit 2
fi
if ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
  echo "test-cluster: installing slurm-wlm and munge" >&2
  # A machine whose package lists are old or missing needs them fetched first.
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q slurm-wlm munge ||
    { apt-get update -q && apt-get install -y -q slurm-wlm munge; }; } > "$dir/apt.log" 2>&1 || {
    echo "test-cluster: apt-get install slurm-wlm munge failed (see $dir/apt.log)" >&2
    exit 4
  }
fi

host=$(hostname -s)
cores=$(nproc)
memory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"

# munge: its own key, socket and pid under DIR, so a munge the machine already runs is left alone.
key=$dir/munge/munge.key
dd if=/dev/urandom bs=1 count=1024 of="$key" status=none
chmod 400 "$key"
socket=$dir/munge/munge.socket
munged --force --key-file "$key" --socket "$socket" --pid-file "$dir/munged.pid" \
  --log-file "$dir/munged.log" --seed-file "$dir/munge/seed" 2> "$dir/munged.err"

cat > "$dir/slurm.conf" << CONF
ClusterName=runfn-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cores RealMemory=$memory State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
export SLURM_CONF=$dir/slurm.conf
for daemon in slurmctld slurmd; do
  "$daemon" -f "$SLURM_CONF" 2> "$dir/$daemon.err" || {
    stop
    cat "$dir/$daemon.err" >&2
    exit 4
  }
done
for _ in $(seq 300); do
  if sinfo --noheader --responding -o '%T' 2> /dev/null | grep -q idle; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "test-cluster: the node did not become idle within 60 s; logs under $dir" >&2
tail -n 5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 4
