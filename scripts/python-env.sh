#!/usr/bin/env bash
# Creates (once) the Python virtualenv the tests use as an independent reference: pyarrow reads
# the shards back, scikit-learn recomputes evaluate's metrics. It lives in the cache folder
# outside the clone; prints its python path.
set -euo pipefail
CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
VENV="$CACHE/test-venv"
PACKAGES=(pyarrow==26.0.1 scikit-learn==1.9.1)
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import pyarrow, sklearn' 2>/dev/null; then
  printf '%s\n' "$VENV/bin/python"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "python-env: python3 is needed for the reference tests (pyarrow, scikit-learn); install Python 3" >&2
  exit 2
fi
mkdir -p "$CACHE"
rm -rf "$VENV"
python3 -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
printf '%s\n' "$VENV/bin/python"
