#!/usr/bin/env bash
# Keeps the night's records for the history page (`report history RUN_DIR/nights/*`): copies the
# stage records and the failed.* files of RUN_DIR into RUN_DIR/nights/<UTC time>/, whole or not
# at all (copied aside, then renamed). A rerun that changed nothing (the same records as the
# newest kept night, and the same failed stage and exit code) keeps no second copy. Usage (from the Makefile): archive-night.sh RUN_DIR
set -euo pipefail
run_dir=$1
shopt -s nullglob
files=()
for name in manifest validate leaks shards ckpt noise baseline gate register report report-failed; do
  [[ -f $run_dir/$name.json ]] && files+=("$run_dir/$name.json")
done
files+=("$run_dir"/train-seed*.json "$run_dir"/eval-seed*.json)
for name in failed.json failed.err failed.stage; do
  [[ -f $run_dir/$name ]] && files+=("$run_dir/$name")
done
(( ${#files[@]} > 0 )) || exit 0
# What the night was: its stage records and where it stopped (failed.stage: the stage and its
# exit code). The failed stage's own record and stderr carry the rerun's times and durations, so
# a rerun that failed the same way on the same records is the same night, not a second one.
fingerprint=$(for f in "${files[@]}"; do
  case ${f##*/} in failed.json | failed.err) continue ;; esac
  printf '%s ' "${f##*/}"
  cksum < "$f"
done)
nights=$run_dir/nights
mkdir -p "$nights"
# Names sort as times: byte order (LC_ALL=C), and a same-second suffix `_NN` sorts after `/`.
newest=$(LC_ALL=C ls -1d "$nights"/*/ 2> /dev/null | tail -n 1 || true)
if [[ -n $newest && -f $newest/.fingerprint && $(cat "$newest/.fingerprint") == "$fingerprint" ]]; then
  exit 0
fi
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
# Two runs within one second (a test, a rerun) still get a folder each, in order.
suffix="" n=0
while [[ -e $nights/$stamp$suffix ]]; do
  n=$((n + 1))
  suffix=$(printf -- '_%02d' "$n")
done
target=$nights/$stamp$suffix
staging=$(mktemp -d "$nights/.staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
cp -p "${files[@]}" "$staging/"
printf '%s\n' "$fingerprint" > "$staging/.fingerprint"
mv "$staging" "$target"
trap - EXIT
printf 'run: %s\n' "kept tonight's records in $target" >&2
