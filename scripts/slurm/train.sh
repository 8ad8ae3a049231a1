#!/bin/bash
# One seed's data-parallel training as a Slurm job of N tasks, on one node or several: `srun`
# starts one rank per task, each told its RANK, WORLD_SIZE and LOCAL_RANK from Slurm's variables
# and the rendezvous address from the job's first node. The same ranks `train --nproc-per-node
# N` starts on one machine, so the weights are the same bit for bit.
#   train.sh RECORD SEED OUT RESULT   # RESULT: the record; the nodes go beside it (.nodes)
set -euo pipefail
export TRAIN_RECORD=$1 TRAIN_SEED=$2 TRAIN_OUT=$3
result=$4
# The rendezvous is on the job's first node, at the address Slurm reaches it by (its NodeAddr:
# a node's name need not resolve on the others).
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MASTER_ADDR=$(scontrol show node "$first" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
MASTER_ADDR=${MASTER_ADDR:-$first}
export MASTER_ADDR MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
# runfn-stage writes the record (rank 0's stdout) atomically; slurm-night.sh says where it is.
# The ranks on this node: --ntasks-per-node when the job gave it, else this node's count from
# SLURM_TASKS_PER_NODE ("2", "2(x3)" or "2,1").
"${RUNFN_STAGE:-runfn-stage}" "$result" - srun --kill-on-bad-exit=1 bash -c \
  'per_node=${SLURM_TASKS_PER_NODE%%[(,]*}
  RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID \
  LOCAL_WORLD_SIZE=${SLURM_NTASKS_PER_NODE:-$per_node} \
  exec "$BIN/train" --record "$TRAIN_RECORD" --seed "$TRAIN_SEED" --out "$TRAIN_OUT" \
    --threads 1 -q'
# The nodes the ranks ran on, beside the record.
scontrol show hostnames "$SLURM_JOB_NODELIST" > "${result%.json}.nodes"
