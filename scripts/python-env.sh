#!/usr/bin/env bash
# Creates (once) the Python virtualenv the tests use as an independent reference: pyarrow reads
# the shards back, scikit-learn recomputes evaluate's metrics, tensorboard reads report's event
# files (its EventAccumulator needs no TensorFlow), moto serves a loopback S3 for
# scripts/s3-test-server.py and boto3 reads that store back; jsonschema checks records against
# docs/schema/ as a team's own script would; safetensors runs scripts/score-reference.py. It
# lives in the cache folder outside the clone; prints its python path.
set -euo pipefail
CACHE="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}"
VENV="$CACHE/test-venv"
PACKAGES=(pyarrow==26.0.1 scikit-learn==1.9.1 tensorboard==2.21.0 'moto[server]==5.2.5' boto3==1.44.8 jsonschema==4.26.0 safetensors==0.7.0 blake3==1.0.11 kubernetes-validate==1.37.0)

# Prints the pins the venv lacks (absent, another version, or not importable), one a line.
missing() {
  "$VENV/bin/python" - "${PACKAGES[@]}" <<'PY'
import importlib, importlib.metadata, sys
# moto.server rather than moto: it imports flask, so a venv without the [server] extra fails.
modules = {"scikit-learn": "sklearn", "moto": "moto.server", "kubernetes-validate": "kubernetes_validate"}
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    name = name.split("[")[0]
    try:
        ok = importlib.metadata.version(name) == version
        importlib.import_module(modules.get(name, name))
    except Exception:
        ok = False
    if not ok:
        print(pin)
PY
}

if [[ -x "$VENV/bin/python" ]] && lacking="$(missing 2>/dev/null)"; then
  if [[ -n "$lacking" ]]; then
    # A venv from before a pin was added or changed: add what it lacks rather than rebuild it.
    mapfile -t lacking_pins <<<"$lacking"
    echo "python-env: installing ${lacking_pins[*]} into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${lacking_pins[@]}" >&2
  fi
  if [[ -z "$(missing)" ]]; then
    printf '%s\n' "$VENV/bin/python"
    exit 0
  fi
  echo "python-env: $VENV still lacks $(missing | tr '\n' ' ')after pip install; recreating it" >&2
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "python-env: python3 is needed for the reference tests (pyarrow, scikit-learn, tensorboard); install Python 3" >&2
  exit 2
fi
mkdir -p "$CACHE"
rm -rf "$VENV"
python3 -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
printf '%s\n' "$VENV/bin/python"
