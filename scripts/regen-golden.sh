#!/usr/bin/env bash
# Rewrites every golden file under testdata/<tool>/ from the current tools. Review the diff before
# committing: a changed golden file is a changed output contract.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins --quiet
RUNFN_BLESS=1 cargo test --test integration --quiet
git status --short testdata
