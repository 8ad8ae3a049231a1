#!/bin/bash
# One stage of a night as a Slurm job (or, from slurm-night.sh --local, a plain process):
#   stage.sh OUT IN PROGRAM ARGS...
# runs PROGRAM ARGS with stdin from IN (`-`: none) and stdout into OUT (`-`: the job's log), OUT
# appearing only when the stage passed (written beside it, then renamed). In an array job, an
# argument `%K` is replaced by the task's index (SLURM_ARRAY_TASK_ID, or PART_INDEX when run
# locally). Arguments are passed as they are: no value is parsed by a shell.
set -euo pipefail
out=$1 in=$2
shift 2
index=${SLURM_ARRAY_TASK_ID:-${PART_INDEX:-}}
args=()
for arg in "$@"; do
  if [[ $arg == *%K* ]]; then
    arg=${arg//%K/$index}
  fi
  args+=("$arg")
done
if [[ $in == - ]]; then in=/dev/null; fi
if [[ $out == - ]]; then
  exec "${args[@]}" < "$in"
fi
"${args[@]}" < "$in" > "$out.next" || { code=$?; rm -f "$out.next"; exit "$code"; }
mv -f "$out.next" "$out"
