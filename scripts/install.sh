#!/usr/bin/env bash
# `make install`: the tools from BIN into PREFIX/bin, their man pages into PREFIX/share/man/man1,
# and completions where bash-completion, zsh and fish look under PREFIX/share. The binaries keep
# their rpath to libtorch's cache folder (scripts/setup-libtorch.sh), so that folder must stay.
#   install.sh BIN PREFIX
set -euo pipefail
if (( $# != 2 )); then
  echo "usage: install.sh BIN PREFIX" >&2
  exit 2
fi
bin=$1 prefix=$2
root=$(cd "$(dirname "$0")/.." && pwd)
case $prefix in
  /*) ;;
  *) prefix=$PWD/$prefix ;;
esac
mkdir -p "$prefix/bin"
for dir in "$root"/tools/*/; do
  tool=$(basename "$dir")
  if [[ ! -x $bin/$tool ]]; then
    echo "install: $bin/$tool is missing; build first (make install builds it)" >&2
    exit 2
  fi
  # A temp file in the same folder, then a rename: a running copy of the tool is never
  # overwritten in place, and a half-copied binary is never on the PATH.
  tmp=$(mktemp "$prefix/bin/.$tool.XXXXXX")
  cp "$bin/$tool" "$tmp"
  chmod 755 "$tmp"
  mv -f "$tmp" "$prefix/bin/$tool"
done
# The stage wrapper the cluster specs run (docs/cluster/): a record in, a record out, atomically.
tmp=$(mktemp "$prefix/bin/.runfn-stage.XXXXXX")
cp "$root/scripts/runfn-stage" "$tmp"
chmod 755 "$tmp"
mv -f "$tmp" "$prefix/bin/runfn-stage"
share=$prefix/share
"$root/scripts/reference-files.sh" "$prefix/bin" "$share/man/man1" \
  "$share/bash-completion/completions" "$share/zsh/site-functions" \
  "$share/fish/vendor_completions.d"
echo "install: $(ls "$root/tools" | wc -l) tools in $prefix/bin, man pages in $share/man/man1, completions under $share" >&2
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "install: $prefix/bin is not on PATH; add it to use the tools by name" >&2 ;;
esac
