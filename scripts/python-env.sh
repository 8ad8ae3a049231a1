#!/usr/bin/env bash
# Creates (once) the Python virtualenv the tests use to read shards with pyarrow, in the cache
# folder outside the clone, and prints its python path.
set -euo pipefail
CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
VENV="$CACHE/test-venv"
PYARROW=pyarrow==26.0.1
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import pyarrow' 2>/dev/null; then
  printf '%s\n' "$VENV/bin/python"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "python-env: python3 is needed for the pyarrow read-back test; install Python 3" >&2
  exit 2
fi
mkdir -p "$CACHE"
rm -rf "$VENV"
python3 -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$PYARROW" >&2
printf '%s\n' "$VENV/bin/python"
