#!/usr/bin/env bash
# ds-validate's two error rates on real tables (tests/validate_real.rs): honest halves stopped
# (two random halves of one table validated against each other) and planted shifts missed (a
# numeric feature in other units, stops moved half a degree, a category's share moved by about
# ten points), on telco, email, resume, credit and stops. `make test` runs 20 halvings a table;
# this runs more, for the numbers a change to the drift checks is judged by. Prints the totals
# per table (stderr).
#
#   scripts/validate-halves.sh                       # 100 halvings a table (about 3 minutes on 2 cores)
#   VALIDATE_HALVINGS=40 scripts/validate-halves.sh
set -euo pipefail
cd "$(dirname "$0")/.."

export VALIDATE_HALVINGS=${VALIDATE_HALVINGS:-100}

cargo build -p ds-validate --quiet
cargo test --test integration validate_real::random_halves -- --nocapture
