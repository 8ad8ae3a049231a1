#!/usr/bin/env bash
# Checks the cluster specs under docs/cluster/ offline, against the schemas their projects
# publish, pinned: the Kubernetes Jobs (docs/cluster/kubernetes/) with kubernetes-validate
# (--strict: an unknown field is refused; Kubernetes 1.37), the Argo Workflows templates
# (docs/cluster/argo/) with @kubernetes-models/argo-workflows and the references `argo lint`
# checks (scripts/cluster-specs/check-argo.mjs). Installs both once into the cache folder.
#   scripts/check-cluster-specs.sh [KUBERNETES.yaml... -- ARGO.yaml...]
# Exit 0 when every spec passed, 1 when one did not (each problem on stderr), 2 bad usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kubernetes=() argo=()
if (( $# )); then
  target=kubernetes
  for arg in "$@"; do
    if [[ $arg == -- ]]; then target=argo; continue; fi
    if [[ $target == kubernetes ]]; then kubernetes+=("$arg"); else argo+=("$arg"); fi
  done
else
  kubernetes=("$root"/docs/cluster/kubernetes/*.yaml)
  argo=("$root"/docs/cluster/argo/*.yaml)
fi
python=$("$root/scripts/python-env.sh")

# The Argo checker's packages, as the lock file pins them, in the cache folder.
cache="${RUNFN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runfn}/cluster-specs"
lock=$root/scripts/cluster-specs/package-lock.json
if ! cmp -s "$lock" "$cache/package-lock.json" || [[ ! -d $cache/node_modules ]]; then
  if ! command -v npm > /dev/null; then
    echo "check-cluster-specs: npm (Node.js) is needed for the Argo schema; install Node.js" >&2
    exit 2
  fi
  rm -rf "$cache"
  mkdir -p "$cache"
  cp "$root/scripts/cluster-specs/package.json" "$lock" "$cache/"
  echo "check-cluster-specs: installing the Argo Workflows schema into $cache" >&2
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error > /dev/null 2> npm.err) || {
    cat "$cache/npm.err" >&2
    rm -rf "$cache/node_modules"
    exit 4
  }
fi
cp "$root/scripts/cluster-specs/check-argo.mjs" "$cache/"

failed=0
if (( ${#kubernetes[@]} )); then
  "$python" -m kubernetes_validate --strict --quiet -k 1.37.0 "${kubernetes[@]}" >&2 || failed=1
  # What no schema knows: an Indexed Job's pods are parts K of N, with N its completions.
  "$python" - "${kubernetes[@]}" << 'PY' || failed=1
import re, sys, yaml
bad = 0
for name in sys.argv[1:]:
    with open(name) as f:
        for doc in yaml.safe_load_all(f):
            spec = (doc or {}).get("spec", {})
            if spec.get("completionMode") != "Indexed":
                continue
            for container in spec["template"]["spec"]["containers"]:
                for arg in container.get("command", []) + container.get("args", []):
                    match = re.fullmatch(r"%K/(\d+)", str(arg))
                    if match and int(match.group(1)) != spec.get("completions"):
                        print(f"{name}: --part {arg} in a Job of {spec.get('completions')} completions", file=sys.stderr)
                        bad = 1
sys.exit(bad)
PY
fi
if (( ${#argo[@]} )); then
  "$python" - "${argo[@]}" << 'PY' | node "$cache/check-argo.mjs" || failed=1
import json, sys, yaml
for name in sys.argv[1:]:
    with open(name) as f:
        for doc in yaml.safe_load_all(f):
            if doc is not None:
                print(json.dumps({"file": name, "doc": doc}))
PY
fi
exit "$failed"
