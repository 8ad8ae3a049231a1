"""Shared helpers of the scripts/bench-*.sh harnesses: child processes timed and measured for
peak RSS, the bench loop that runs the tools side by side, medians, machine facts, atomic JSON
writes. Standard library only."""
import datetime
import functools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

PREFIX = "bench-data"


def log(msg):
    print(f"{PREFIX}: {msg}", file=sys.stderr, flush=True)


def busy_seconds():
    """CPU seconds the whole machine has spent busy (all but idle and iowait), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return (sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


_quiet_budget = [float(os.environ.get("BENCH_QUIET_WAIT_S", "600"))]


def wait_quiet(limit=300.0, window=2.0, max_busy=0.25):
    """Before a timed run, wait (at most `limit` s, and BENCH_QUIET_WAIT_S s over the whole
    harness) until other processes use under `max_busy` cores for `window` seconds; e.g. a build
    running beside the benchmark. Returns the seconds waited."""
    waited, said = 0.0, False
    while waited < min(limit, _quiet_budget[0]):
        b0 = busy_seconds()
        time.sleep(window)
        b1 = busy_seconds()
        waited += window
        if b0 is None or b1 is None or (b1 - b0) / window < max_busy:
            break
        if not said:
            log(f"machine busy ({(b1 - b0) / window:.1f} cores used by others); waiting for it to calm down")
            said = True
    _quiet_budget[0] = max(0.0, _quiet_budget[0] - waited)
    return waited


def measure(argv, stdout=None, cwd=None, env=None):
    """Run argv as one child process; wall seconds from spawn to reap, peak RSS of that child
    (ru_maxrss from wait4, KiB on Linux) in bytes, and how it ended. stdout: a path or None
    (discarded). stderr is kept (last 2000 chars) for failure reports."""
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL
    err_path = f"{stdout or os.path.join(os.environ.get('BENCH_SCRATCH', '/tmp'), 'child')}.stderr"
    err = open(err_path, "wb")
    try:
        busy0 = busy_seconds()
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        busy1 = busy_seconds()
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdout:
            out.close()
        err.close()
    with open(err_path, "rb") as f:
        tail = f.read().decode("utf-8", "replace")[-2000:]
    os.remove(err_path)
    rc = proc.returncode
    ok = rc == 0
    reason = None
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        reason = f"killed by {name}" + (" (likely out of memory)" if -rc == signal.SIGKILL else "")
    elif rc != 0:
        reason = f"exit status {rc}"
    cpu = usage.ru_utime + usage.ru_stime
    # cores kept busy by OTHER processes during the run (a concurrent build, say): noise indicator
    others = None if busy0 is None or busy1 is None else max(0.0, (busy1 - busy0 - cpu) / elapsed)
    return {"ok": ok, "seconds": elapsed, "cpu_s": cpu, "other_cores_busy": others,
            "peak_rss_bytes": usage.ru_maxrss * 1024, "returncode": rc,
            "reason": reason, "stderr_tail": tail.strip()}


def version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
        return (out.stdout or out.stderr).strip().splitlines()[0].strip()
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                    model = value.strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "model": model, "memory_bytes": mem,
            "loadavg_at_write": [round(x, 2) for x in os.getloadavg()]}


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def commit():
    """The commit the measured tools were built from (BENCHMARKS.md names it), or "unknown"."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rotate(names, run):
    k = run % len(names)
    return names[k:] + names[:k]


class CheckFailed(Exception):
    """Raised by a tool's check: the run ended well but its output is wrong."""


class Reruns:
    """The rerun rule of bench(): a run that timed out, or beside which other processes kept more
    than `busy` cores busy, is run once more (only the rerun is kept), at most `budget` times over
    every bench() call that is given this object."""

    def __init__(self, budget, busy):
        self.budget, self.left, self.busy = budget, budget, busy

    @property
    def used(self):
        return self.budget - self.left


def bench(tools, runs, label, *, timeout=None, reruns=None, check_errors=(CheckFailed,), describe=None,
          show_stderr=False):
    """Run every tool `runs` times as its own child process (measure()); the tools alternate within
    a run and the order rotates between runs. A tool that fails is recorded as failed and not run
    again; the others go on. Returns {name: [samples]}.

    tools: {name: {"argv", "stdout"?, "prepare"?, "check"?, "ok_codes"?, "cleanup"?}}. prepare()
    runs before every attempt, cleanup() after the run; check(sample) runs when the exit status is
    in ok_codes (default (0,)), may add to the sample, and raises one of `check_errors` when the
    output is wrong ("wrong output: ..." in the sample's reason).
    timeout: seconds per run; the child runs under `timeout -k 5 TIMEOUT` and a run past it fails.
    reruns: a Reruns (shareable between calls); without it nothing is rerun.
    describe(name, tool, sample): the text after "run i/n " of a good run's log line (default: the
    name, the seconds and the peak RSS).
    show_stderr: also log the last 600 characters of a failed run's stderr."""
    samples = {name: [] for name in tools}
    failed = set()
    for run in range(runs):
        for name in rotate(list(tools), run):
            if name in failed:
                continue
            t = tools[name]
            for attempt in (1, 2):
                if t.get("prepare"):
                    t["prepare"]()
                wait_quiet()
                argv = t["argv"] if timeout is None else ["timeout", "-k", "5", str(timeout), *t["argv"]]
                s = measure(argv, stdout=t.get("stdout"))
                timed_out = timeout is not None and s["returncode"] in (124, 137, -9)
                if timed_out:
                    s["reason"] = f"timed out after {timeout} s"
                busy = s["other_cores_busy"]
                if reruns is None or attempt == 2 or reruns.left <= 0:
                    break
                if timed_out or (busy is not None and busy > reruns.busy):
                    reruns.left -= 1
                    log(f"{label}: run {run + 1}/{runs} {name}: "
                        + (s["reason"] if timed_out else f"other processes kept {busy:.1f} cores busy")
                        + "; once more when the machine is quiet")
                    continue
                break
            if not timed_out and s["returncode"] in t.get("ok_codes", (0,)):
                s["ok"], s["reason"] = True, None
                try:
                    if t.get("check"):
                        t["check"](s)
                except check_errors as err:
                    s["ok"], s["reason"] = False, f"wrong output: {err}"
            samples[name].append(s)
            if not s["ok"]:
                failed.add(name)
                log(f"{label}: run {run + 1}/{runs} {name}: FAILED ({s['reason']})")
                if show_stderr and s.get("stderr_tail"):
                    log(f"  stderr: {s['stderr_tail'][-600:]}")
            else:
                text = (describe(name, t, s) if describe else
                        f"{name:14s} {s['seconds']:8.2f} s  peak RSS {fmt_mib(s['peak_rss_bytes'])}")
                log(f"{label}: run {run + 1}/{runs} {text}"
                    + (f"  (other processes busy: {busy:.1f} cores)" if busy is not None and busy > 0.2 else ""))
            if t.get("cleanup"):
                t["cleanup"]()
    return samples


def summarize(samples, version_text, command, extra=None):
    """Per-tool JSON block from the list of measure() results of that tool."""
    block = {"version": version_text, "command": command}
    good = [s for s in samples if s["ok"]]
    if len(good) == len(samples) and samples:
        secs = [s["seconds"] for s in samples]
        block.update({"status": "ok", "median_s": round(statistics.median(secs), 3),
                      "all_s": [round(x, 3) for x in secs],
                      "peak_rss_bytes": max(s["peak_rss_bytes"] for s in samples),
                      "cpu_s": [round(s["cpu_s"], 2) for s in samples],
                      "other_cores_busy": [None if s["other_cores_busy"] is None else round(s["other_cores_busy"], 2)
                                           for s in samples]})
    else:
        bad = next((s for s in samples if not s["ok"]), None)
        block.update({"status": "failed", "median_s": None, "all_s": [round(s["seconds"], 3) for s in samples],
                      "peak_rss_bytes": max((s["peak_rss_bytes"] for s in samples), default=None),
                      "failure": (bad or {}).get("reason") or "not run",
                      "stderr_tail": (bad or {}).get("stderr_tail", "")[-600:]})
    if extra:
        block.update(extra)
    return block


def interference(results):
    """The most cores other processes kept busy during any timed run (0 = a quiet machine)."""
    vals = [x for r in results.values() for x in (r.get("other_cores_busy") or []) if x is not None]
    worst = max(vals, default=None)
    return {"max_other_cores_busy": worst,
            "note": "average number of cores used by processes other than the timed one during a run; "
                    "above ~0.2 the times (and ratios) are disturbed by other work on the machine"}


def ratio(num, den):
    if num is None or den is None or den == 0:
        return None
    return round(num / den, 3)


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def warm(paths):
    """Read files once so every tool starts with them in the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass


def fmt_mib(n):
    return "-" if n is None else f"{n / (1 << 20):.0f} MiB"


def fmt_s(x):
    return "   failed" if x is None else f"{x:8.2f} s"


@functools.cache
def peer_versions(python, peers_script):
    """The peers' versions as the peers script reports them (`SCRIPT versions`); {} when it fails."""
    try:
        return json.loads(subprocess.run([python, peers_script, "versions"], capture_output=True,
                                         text=True, check=True).stdout)
    except Exception:  # noqa: BLE001
        return {}


# --- the training benchmarks (train_harness.py, ddp_harness.py) --------------------------------------
def bench_record(base, scratch, tag, config, mf_hash="target/release/mf-hash"):
    """The record at `base` with manifest.config replaced and the manifest hashed again by mf-hash
    (train refuses a manifest that does not hash to its manifest_hash; each setting's config gives
    its own hash, so train's checkpoints of one setting are never taken for another's), written to
    SCRATCH/record-TAG.json; returns that path."""
    with open(base) as f:
        record = json.load(f)
    record.pop("ckpt_interval", None)  # no time-based checkpoints
    record["manifest"]["config"] = config
    manifest = os.path.join(scratch, f"manifest-{tag}.json")
    write_json(manifest, record["manifest"])
    hashed = json.loads(subprocess.run([mf_hash, manifest, "-q"], check=True, capture_output=True,
                                       text=True).stdout)
    record["manifest"], record["manifest_hash"] = hashed["manifest"], hashed["manifest_hash"]
    path = os.path.join(scratch, f"record-{tag}.json")
    write_json(path, record)
    return path


def read_last_json(path):
    """The JSON object on the last line of a file; CheckFailed when there is none."""
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as err:
        raise CheckFailed(f"{path}: no JSON ({err})") from None


def metrics_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def median_of(samples, key, sub=None):
    """The median of sample["metrics"][key] (or [key][sub]) over the runs; None unless every run
    has it."""
    vals = [s["metrics"][key] if sub is None else (s["metrics"][key] or {}).get(sub) for s in samples if s["ok"]]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals and len(vals) == len(samples) else None


def rnd(x, digits=4):
    return None if x is None else round(x, digits)


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
