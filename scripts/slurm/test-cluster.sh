#!/bin/bash
# A Slurm cluster on one machine for tests: munge, slurmctld and NODES slurmd (1 or 2), every file
# under DIR. Needs root and Debian's slurm-wlm and munge (installed with apt-get when missing).
#   test-cluster.sh start DIR [NODES]  # once the nodes are idle, prints SLURM_CONF=DIR/slurm.conf,
#                                      # NODES=n (the nodes it made) and, for 2, GLOO_SOCKET_IFNAME
#   test-cluster.sh stop DIR           # stops what it started: daemons by their pids, network
#                                      # namespaces and bridge by name
# One node runs on the loopback address. Two nodes each get a network namespace of their own with
# its own host name (node1, node2), joined to the controller by a bridge on a private /24; where
# the kernel refuses namespaces or bridges, it falls back to one node and prints NODES=1.
set -euo pipefail
command=${1:?usage: test-cluster.sh start|stop DIR [NODES]}
dir=${2:?usage: test-cluster.sh start|stop DIR [NODES]}
nodes=${3:-1}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

stop() {
  for pidfile in "$dir"/slurmd*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2> /dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2> /dev/null || true
    rm -f "$pidfile"
  done
  if [[ -f $dir/network ]]; then
    read -r tag _ < "$dir/network"
    for i in 1 2; do ip netns del "rf$tag-n$i" 2> /dev/null || true; done
    ip link del "rf$tag-br" 2> /dev/null || true
    rm -f "$dir/network"
  fi
}

if [[ $command == stop ]]; then
  stop
  exit 0
fi
if [[ $command != start ]]; then
  echo "test-cluster: unknown command \`$command\` (start or stop)" >&2
  exit 2
fi
if [[ $nodes != 1 && $nodes != 2 ]]; then
  echo "test-cluster: NODES is 1 or 2, not \`$nodes\`" >&2
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

# Two nodes: a bridge in this namespace (the controller's side, .1) and a namespace per node
# (.2, .3), each with its own host name. The names and the /24 come from a tag of DIR, so two
# clusters can run side by side.
network() {
  local tag=$1 net=$2 i
  ip link add "rf$tag-br" type bridge || return 1
  echo "$tag $net" > "$dir/network"
  ip addr add "$net.1/24" dev "rf$tag-br" && ip link set "rf$tag-br" up || return 1
  for i in 1 2; do
    ip netns add "rf$tag-n$i" || return 1
    ip link add "rf$tag-h$i" type veth peer name "rf$tag-v$i" || return 1
    ip link set "rf$tag-v$i" netns "rf$tag-n$i" || return 1
    ip link set "rf$tag-h$i" master "rf$tag-br" && ip link set "rf$tag-h$i" up || return 1
    # The same interface name on every node, so one GLOO_SOCKET_IFNAME serves them all.
    ip netns exec "rf$tag-n$i" ip link set "rf$tag-v$i" name rfnet0 || return 1
    ip netns exec "rf$tag-n$i" ip addr add "$net.$((i + 1))/24" dev rfnet0 || return 1
    ip netns exec "rf$tag-n$i" ip link set rfnet0 up || return 1
    ip netns exec "rf$tag-n$i" ip link set lo up || return 1
  done
}
host=$(hostname -s)
ctld_addr=127.0.0.1
if [[ $nodes == 2 ]]; then
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  tag=$(printf '%04x' $((sum % 65536)))
  net="10.$((100 + sum % 100)).$((sum / 100 % 250)).0"
  net=${net%.0}
  if network "$tag" "$net" 2> "$dir/network.err"; then
    ctld_addr=$net.1
  else
    why=$(head -n 1 "$dir/network.err")
    echo "test-cluster: the kernel refused a network namespace or bridge ($why); one node" >&2
    stop
    nodes=1
  fi
fi

cores=$(nproc)
memory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 / nodes))
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
mkdir -p "$dir/state" "$dir/munge"

# munge: its own key, socket and pid under DIR, so a munge the machine already runs is left alone.
key=$dir/munge/munge.key
dd if=/dev/urandom bs=1 count=1024 of="$key" status=none
chmod 400 "$key"
socket=$dir/munge/munge.socket
munged --force --key-file "$key" --socket "$socket" --pid-file "$dir/munged.pid" \
  --log-file "$dir/munged.log" --seed-file "$dir/munge/seed" 2> "$dir/munged.err"

if [[ $nodes == 2 ]]; then
  node_lines="NodeName=node1 NodeAddr=$net.2 CPUs=$cores RealMemory=$memory State=UNKNOWN
NodeName=node2 NodeAddr=$net.3 CPUs=$cores RealMemory=$memory State=UNKNOWN"
  node_list=node1,node2
else
  node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$cores RealMemory=$memory State=UNKNOWN"
  node_list=$host
fi
cat > "$dir/slurm.conf" << CONF
ClusterName=runfn-test
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
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
$node_lines
PartitionName=test Nodes=$node_list Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
echo "CgroupPlugin=cgroup/v1" > "$dir/cgroup.conf"
export SLURM_CONF=$dir/slurm.conf
started() {
  stop
  cat "$1" >&2
  exit 4
}
slurmctld -f "$SLURM_CONF" 2> "$dir/slurmctld.err" || started "$dir/slurmctld.err"
if [[ $nodes == 2 ]]; then
  for i in 1 2; do
    ip netns exec "rf$tag-n$i" unshare --uts sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' \
      slurmd "node$i" "$SLURM_CONF" 2> "$dir/slurmd-node$i.err" || started "$dir/slurmd-node$i.err"
  done
else
  slurmd -f "$SLURM_CONF" 2> "$dir/slurmd.err" || started "$dir/slurmd.err"
fi
for _ in $(seq 300); do
  idle=$(sinfo --noheader --responding -t idle -o '%D' 2> /dev/null |
    awk '{n += $1} END {print n + 0}')
  if [[ $idle -ge $nodes ]]; then
    echo "SLURM_CONF=$SLURM_CONF"
    echo "NODES=$nodes"
    # The interface the nodes reach each other by (Gloo's rendezvous would take loopback).
    if [[ $nodes == 2 ]]; then echo "GLOO_SOCKET_IFNAME=rfnet0"; fi
    exit 0
  fi
  sleep 0.2
done
echo "test-cluster: the nodes did not become idle within 60 s; logs under $dir" >&2
tail -n 5 "$dir"/slurm*.log >&2 || true
stop
exit 4
