"""The Python side of tests/bench/bench_common.sh: the lock, the CPU and the
load, the rule that marks a result noisy.  Keep the two rules alike."""
import fcntl
import os
import statistics
import sys

LOCK = os.environ.get("HPS_BENCH_LOCK", "/tmp/hps-bench.lock")
LOAD_MAX = 1.5  # 1-minute load average above it: noisy
SPREAD_MAX = float(os.environ.get("BENCH_SPREAD_MAX", "0.05"))  # sd / mean of one configuration's runs
MIN_S = float(os.environ.get("BENCH_MIN_S", "5"))  # seconds each run lasts at least

_reasons = []
_lock = None


def cpu():
    name = os.uname().machine
    try:
        with open("/proc/cpuinfo") as f:
            name = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def noisy(reason):
    """The result is marked noisy, for reason (into the shell side's file when a script runs us)."""
    path = os.environ.get("BENCH_NOISY_FILE")
    if path:
        with open(path, "a") as f:
            f.write(reason + "\n")
    else:
        _reasons.append(reason)


def note_load():
    l1 = float(loadavg().split()[0])
    if l1 > LOAD_MAX:
        noisy(f"load {l1:g} > {LOAD_MAX:g}")


def begin(name):
    """Waits for any other bench (unless the calling script holds the lock), then names the CPU and the load."""
    global _lock
    if os.environ.get("HPS_BENCH_LOCKED") != "1":
        _lock = open(LOCK, "a")
        try:
            fcntl.flock(_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(f"{name}: waiting for {LOCK} (another bench is running)", file=sys.stderr, flush=True)
            fcntl.flock(_lock, fcntl.LOCK_EX)
        os.environ["HPS_BENCH_LOCKED"] = "1"
    print(f"{name}: cpu: {cpu()}; load at start: {loadavg()}", flush=True)
    note_load()


def stats(xs):
    """(mean, sd, sd / mean) of the runs."""
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return m, sd, (sd / m if m else 0.0)


def spread(what, xs):
    """Marks the result noisy when the runs of one configuration spread past the bound; returns the cv."""
    cv = stats(xs)[2]
    if cv > SPREAD_MAX:
        noisy(f"{what}: runs spread {100 * cv:.1f}% (sd/mean) > {100 * SPREAD_MAX:.0f}%")
    return cv


def end(name):
    """The load at end and the verdict (only where no script around us gives it)."""
    note_load()
    print(f"{name}: cpu: {cpu()}; load at end: {loadavg()}", flush=True)
    if os.environ.get("BENCH_NOISY_FILE"):
        return
    if _reasons:
        print(f"{name}: NOISY: " + "; ".join(dict.fromkeys(_reasons)))
    else:
        print(f"{name}: quiet: load <= {LOAD_MAX:g} at start, between runs and at end; every configuration's "
              f"runs within {100 * SPREAD_MAX:.0f}% (sd/mean)")
