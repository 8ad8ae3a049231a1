#!/usr/bin/env bash
# Checks a report page in a real browser (headless Chromium): every plot its
# <meta name="runfn-plots"> promises is drawn (the page's own check, page_check.js, says so in
# <html data-plots-checked>), no console error or uncaught exception, nothing loaded from
# outside the page; and saves a full-page screenshot. A page with verdicts (a night's PASSED,
# BLOCKED, FAILED) must show them visibly at the top (page_check.js checks it); the summary line
# quotes them. Each TEXT given must appear in the page's rendered text (what a reader sees: text
# hidden by a style does not count).
#
#   scripts/check-report-page.sh PAGE.html SCREENSHOT.png [TEXT...]
#
# Exit codes: 0 passed (one summary line on stderr), 1 a check failed (one line per problem),
# 2 usage error or no browser. Installs Debian's chromium when it is missing.
set -euo pipefail

me=check-report-page
# Each browser run; a hung browser must not hang the tests.
RUN_LIMIT_S=30
# Tallest screenshot taken; a taller page is cut there (noted in the summary, not a failure).
MAX_HEIGHT=16384
WIDTH=1280

usage() {
  echo "$me: $1" >&2
  echo "usage: scripts/check-report-page.sh PAGE.html SCREENSHOT.png [TEXT...]" >&2
  exit 2
}

[[ $# -ge 2 ]] || usage "expected at least 2 arguments, got $#"
page=$1
shot=$2
expected_texts=("${@:3}")
[[ -f $page && -r $page ]] || usage "$page: not a readable file"
shot_dir=$(dirname -- "$shot")
[[ -d $shot_dir ]] || usage "$shot: its folder $shot_dir does not exist"
[[ $shot == *.png ]] || usage "$shot: the screenshot is a PNG; name it *.png"

# Never a silent skip: without a browser the check cannot pass.
if ! command -v chromium >/dev/null 2>&1; then
  echo "$me: chromium not found; installing Debian's chromium package" >&2
  if [[ $(id -u) -eq 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo -n)
  else
    echo "$me: chromium is missing and neither root nor sudo is available to install it (apt-get install chromium)" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Tests check pages in parallel: one installs, the others wait for it (and for dpkg's lock).
  exec 9>"${TMPDIR:-/tmp}/runfn-chromium-install.lock"
  flock 9
  apt=(apt-get -o DPkg::Lock::Timeout=600 install -y chromium)
  if ! command -v chromium >/dev/null 2>&1 && ! "${as_root[@]}" "${apt[@]}" >&2; then
    # A fresh machine has no package lists yet.
    "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 update >&2 && "${as_root[@]}" "${apt[@]}" >&2 || true
  fi
  flock -u 9
  if ! command -v chromium >/dev/null 2>&1; then
    echo "$me: could not install chromium (apt-get install -y chromium failed); the page cannot be checked" >&2
    exit 2
  fi
fi

work=$(mktemp -d)
shot_tmp=""
cleanup() {
  rm -rf "$work"
  [[ -z $shot_tmp ]] || rm -f "$shot_tmp"
}
trap cleanup EXIT

problems=()
problem() { problems+=("$1"); }

# Self-contained only: a static look at the markup (the browser's list of loaded resources
# below catches what this misses). Links (<a href>) are not loads and are allowed.
tags=$(grep -oiE '<[a-z][^>]*>' "$page" | grep -viE '^<a([[:space:]]|>)' || true)
while IFS= read -r tag; do
  [[ -n $tag ]] && problem "loads an external resource: ${tag:0:160}"
done < <(grep -iE "(src|href|srcset|poster)[[:space:]]*=[[:space:]]*[\"']?(https?:)?//" <<<"$tags" || true)
while IFS= read -r tag; do
  [[ -n $tag ]] && problem "loads a script from a file instead of inlining it: ${tag:0:160}"
done < <(grep -iE '^<script[^>]*[[:space:]]src[[:space:]]*=' <<<"$tags" || true)
while IFS= read -r tag; do
  [[ -n $tag ]] && problem "links a stylesheet instead of inlining it: ${tag:0:160}"
done < <(grep -iE '^<link[^>]*stylesheet' <<<"$tags" || true)
if grep -qiE "url\([[:space:]]*[\"']?(https?:)?//|@import" "$page"; then
  problem "its CSS loads from outside the page (url(http...) or @import)"
fi

# Runs first in the page (put right after <head>) so that it sees every error: console.error,
# a failed console.assert, an uncaught exception or rejection, a resource that failed to load.
# Chromium's own console log does not say a message's level, so it cannot tell these from
# console.log. Findings go into <html data-runfn-*> attributes, which --dump-dom shows.
read -r -d '' hook <<'JS' || true
<script>(function () {
  var root = document.documentElement, errors = 0, resources = 0;
  function record(kind, message) {
    errors++;
    root.setAttribute("data-runfn-error-" + errors, (kind + ": " + message).replace(/\s+/g, " ").slice(0, 300));
  }
  function text(args) { return Array.prototype.map.call(args, String).join(" "); }
  var error = console.error, assert = console.assert;
  console.error = function () { record("console.error", text(arguments)); return error.apply(console, arguments); };
  console.assert = function (ok) {
    if (!ok) { record("console.assert", text(Array.prototype.slice.call(arguments, 1))); }
    return assert.apply(console, arguments);
  };
  window.addEventListener("error", function (event) {
    var target = event.target;
    if (target && target !== window && target.tagName) {
      record("failed to load", "<" + target.tagName.toLowerCase() + "> " + (target.src || target.href || ""));
    } else {
      record("uncaught exception", event.message + " (" + event.filename + ":" + event.lineno + ")");
    }
  }, true);
  window.addEventListener("unhandledrejection", function (event) { record("unhandled rejection", String(event.reason)); });
  window.addEventListener("load", function () {
    var shown = document.body ? document.body.innerText.replace(/\s+/g, " ") : "";
    [__RUNFN_EXPECT__].forEach(function (encoded, i) {
      var bytes = Uint8Array.from(atob(encoded), function (c) { return c.charCodeAt(0); });
      var want = new TextDecoder().decode(bytes).replace(/\s+/g, " ");
      root.setAttribute("data-runfn-expect-" + (i + 1), shown.indexOf(want) >= 0 ? "found" : "missing");
    });
    performance.getEntriesByType("resource").forEach(function (entry) {
      resources++;
      root.setAttribute("data-runfn-resource-" + resources, entry.name.slice(0, 300));
    });
    var meta = document.querySelector('meta[name="runfn-plots"]');
    if (meta) { root.setAttribute("data-runfn-plots", meta.content); }
    root.setAttribute("data-runfn-loaded", "true");
  });
})();</script>
JS
# The expected texts go in as base64, so no quote or backslash in them needs escaping for JS.
encoded=""
for text in "${expected_texts[@]}"; do
  encoded+="${encoded:+,}\"$(printf '%s' "$text" | base64 -w0)\""
done
hook=${hook/__RUNFN_EXPECT__/$encoded}
# On one line, so the page's own line numbers in error messages stay right.
hook=$(tr -d '\n' <<<"$hook")

html=$(<"$page")
head_re='<[Hh][Ee][Aa][Dd]([[:space:]][^>]*)?>'
if [[ $html =~ $head_re ]]; then
  head_tag=${BASH_REMATCH[0]}
  printf '%s\n' "${html/"$head_tag"/"$head_tag$hook"}" >"$work/page.html"
else
  problem "has no <head> (the plot list lives in <meta name=\"runfn-plots\"> there)"
  printf '%s\n' "$hook$html" >"$work/page.html"
fi
url="file://$work/page.html"

# The background-networking flags matter: without them Chromium's own connections on start-up
# fail on a closed network and log errors of their own.
browser() {
  local profile
  profile=$(mktemp -d "$work/profile.XXXXXX")
  timeout -k 5 "$RUN_LIMIT_S" chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$profile" "$@"
}

# The page's scripts run on load; the virtual time budget lets timers they start run too,
# without waiting for them in real time.
status=0
browser --window-size="$WIDTH,1000" --virtual-time-budget=5000 --dump-dom "$url" \
  >"$work/dom.html" 2>"$work/dom.log" || status=$?
if [[ $status -ne 0 ]]; then
  problem "chromium failed (exit $status$([[ $status -eq 124 ]] && echo ", over ${RUN_LIMIT_S} s")) reading the page: $(tail -n 3 "$work/dom.log" | tr '\n' ' ')"
fi

# The attributes of <html> after the scripts ran, one `name="value"` a line, entities decoded.
root_attrs=$(grep -o -m1 -iE '<html[^>]*>' "$work/dom.html" | grep -oE '[a-z0-9-]+="[^"]*"' |
  sed -e 's/&quot;/"/g' -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&#39;/'"'"'/g' -e 's/&amp;/\&/g' || true)
attr() { sed -n "s/^$1=\"\\(.*\\)\"\$/\\1/p" <<<"$root_attrs" | head -n 1; }

[[ $(attr data-runfn-loaded) == true ]] || problem "the page never finished loading (no load event within the time budget)"
while IFS= read -r line; do
  [[ -n $line ]] && problem "${line#data-runfn-error-*=\"}"
done < <(grep -E '^data-runfn-error-[0-9]+=' <<<"$root_attrs" | sed 's/"$//' || true)
while IFS= read -r line; do
  [[ -n $line ]] && problem "loaded a resource from outside the page: ${line#data-runfn-resource-*=\"}"
done < <(grep -E '^data-runfn-resource-[0-9]+=' <<<"$root_attrs" | sed 's/"$//' || true)

# The promise as the browser parsed it (a grep of the file would also find it in scripts).
expected=$(attr data-runfn-plots)
if ! grep -qE '^data-runfn-plots=' <<<"$root_attrs"; then
  problem "has no <meta name=\"runfn-plots\" content=\"...\"> listing its plots"
fi
expected_count=$(tr ',' '\n' <<<"$expected" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//' | grep -c . || true)
checked=$(attr data-plots-checked)
if [[ $checked != "$expected_count" ]]; then
  if [[ -z $checked ]]; then
    problem "the page's plot check did not pass (no <html data-plots-checked>: a plot is missing, or the check never ran)"
  else
    problem "the page's plot check counted $checked plots, the page promises $expected_count ($expected)"
  fi
fi

for i in "${!expected_texts[@]}"; do
  [[ $(attr "data-runfn-expect-$((i + 1))") == found ]] ||
    problem "does not show \"${expected_texts[$i]}\" (not in its rendered text)"
done
verdict=$(attr data-verdict)

height=$(attr data-page-height)
[[ $height =~ ^[0-9]+$ && $height -gt 0 ]] || height=1000
cut=""
if ((height > MAX_HEIGHT)); then
  cut=" (cut at $MAX_HEIGHT of $height px)"
  height=$MAX_HEIGHT
fi

# Blank means as small as a screenshot of an empty page of the same size.
shot_tmp=$(mktemp "$shot_dir/.$(basename -- "$shot").tmpXXXXXX")
rm -f "$shot_tmp"
shot_tmp="$shot_tmp.png"
echo '<!doctype html><html><head></head><body></body></html>' >"$work/blank.html"
browser --window-size="$WIDTH,$height" --screenshot="$work/blank.png" "file://$work/blank.html" \
  >"$work/blank.log" 2>&1 &
blank_pid=$!
status=0
browser --window-size="$WIDTH,$height" --screenshot="$shot_tmp" "$url" >"$work/shot.log" 2>&1 || status=$?
wait "$blank_pid" || true
png_size() { stat -c %s "$1" 2>/dev/null || echo 0; }
# A PNG's width and height are the big-endian u32s at bytes 16..24 (the IHDR chunk).
png_dims() { od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%dx%d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8 }'; }
if [[ $status -ne 0 || ! -s $shot_tmp ]]; then
  problem "no screenshot (chromium exit $status): $(tail -n 3 "$work/shot.log" | tr '\n' ' ')"
elif [[ $(head -c 8 "$shot_tmp" | od -An -tx1 | tr -d ' \n') != 89504e470d0a1a0a ]]; then
  problem "the screenshot is not a PNG"
else
  dims=$(png_dims "$shot_tmp")
  [[ $dims == "${WIDTH}x$height" ]] || problem "the screenshot is $dims, expected ${WIDTH}x$height"
  size=$(png_size "$shot_tmp")
  blank=$(png_size "$work/blank.png")
  ((blank > 0)) || problem "no blank screenshot to compare with: $(tail -n 3 "$work/blank.log" | tr '\n' ' ')"
  ((size > blank + blank / 10)) || problem "the screenshot looks blank ($size bytes; an empty page of that size is $blank)"
fi

# Kept on failure too: the picture is what one looks at first.
if [[ -s $shot_tmp ]]; then
  mv -f "$shot_tmp" "$shot"
  shot_tmp=""
fi
if ((${#problems[@]} > 0)); then
  for p in "${problems[@]}"; do
    # Name the page and its neighbours as given, not as the copy in the temp folder.
    p=${p//"$url"/"$page"}
    echo "$me: $page: ${p//"file://$work/"/}" >&2
  done
  exit 1
fi
shows=""
((${#expected_texts[@]} == 0)) || shows=", the ${#expected_texts[@]} texts asked for shown"
[[ -z $verdict ]] || shows+=", verdict: $verdict"
echo "$me: $page: $expected_count plots drawn ($expected), no console errors, self-contained$shows; screenshot $shot (${dims}$cut, $size bytes)" >&2
