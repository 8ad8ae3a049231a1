#!/usr/bin/env bash
# Rewrites the checked-in reference (docs/man/*.1 and completions/) from the tools in BIN
# (default target/debug); review the diff. tests/reference.rs fails while they are out of date.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/debug}
"$root/scripts/reference-files.sh" "$bin" "$root/docs/man" "$root/completions/bash" \
  "$root/completions/zsh" "$root/completions/fish"
git -C "$root" status --short -- docs/man completions
