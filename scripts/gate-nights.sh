#!/usr/bin/env bash
# The gate's two error rates over many simulated nights (tests/gate_nights.rs): honest retrains
# blocked, planted regressions let through, on telco, email and the demo's missing-new-accounts
# data. `make test` runs 20 nights a table; this runs more, for the numbers a change to the gate
# is judged by. Prints each night and the totals per table (stderr).
#
#   scripts/gate-nights.sh            # 100 nights a table (about 5 minutes on 2 cores)
#   GATE_NIGHTS=40 scripts/gate-nights.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LIBTORCH=${LIBTORCH:-$(scripts/setup-libtorch.sh)}
export LIBTORCH
export GATE_NIGHTS=${GATE_NIGHTS:-100}

cargo build --workspace --bins --quiet
cargo test --test integration gate_nights -- --nocapture --test-threads 2
