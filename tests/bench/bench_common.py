"""The Python side of tests/bench/bench_common.sh: the lock, the CPU and the
load, the rule that marks a result noisy.  Keep the two rules alike."""
import fcntl
import math
import os
import statistics
import sys
import time

LOCK = os.environ.get("HPS_BENCH_LOCK", "/tmp/hps-bench.lock")
QUIET_LOAD = 1.0  # 1-minute load at start and at end above it: noisy
# whole seconds to wait, at most, for the load to fall to it (bench_common.sh's BENCH_SETTLE_S)
SETTLE_S = int(os.environ.get("BENCH_SETTLE_S") or max(120, int(60 * math.log(os.cpu_count() or 1) + 60)))
LOADAVG = os.environ.get("HPS_BENCH_LOADAVG", "/proc/loadavg")  # (tests/cli/bench.bats gives a file of its own)
SPREAD_MAX = float(os.environ.get("BENCH_SPREAD_MAX", "0.05"))  # sd / mean of one configuration's runs
MIN_S = float(os.environ.get("BENCH_MIN_S", "5"))  # seconds each run lasts at least
OTHER_MAX = 5.0  # % of the machine's CPU other processes used: above it, noisy

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
    with open(LOADAVG) as f:
        return " ".join(f.read().split()[:3])


def settle():
    """Waits, SETTLE_S seconds at most, for the 1-minute load to fall to
    QUIET_LOAD; returns the seconds it waited.  The load average counts the
    bench's own threads too (bench_common.sh's bench_settle): it says whether
    anything else runs only before the runs and once theirs has decayed."""
    waited = 0  # the seconds slept, as bench_settle counts them
    while float(loadavg().split()[0]) > QUIET_LOAD and waited < SETTLE_S:
        time.sleep(1)
        waited += 1
    return waited


def quiet_load(when, waited):
    """The settled load as said ("X Y Z", and how long it waited); noisy above QUIET_LOAD."""
    said = loadavg()  # one reading, said and judged
    l1 = float(said.split()[0])
    said += f" (after {waited} s at rest)" if waited > 0 else ""
    if l1 > QUIET_LOAD:
        noisy(f"load {l1:g} at {when} > {QUIET_LOAD:g} after {waited} s at rest")
    return said


def busy_s():
    """The machine's busy CPU seconds so far, every core (bench_common.sh's bench_busy_s)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def own_s():
    """This process's and its waited-for children's CPU seconds."""
    return sum(os.times()[:4])


_start = None


def other():
    """(share in %, seconds, wall seconds): the CPU other processes than the bench's used since begin:
    the load average counts the bench's own threads, this only the others'."""
    t0, b0, o0 = _start
    o = max(0.0, (busy_s() - b0) - (own_s() - o0))
    w = time.monotonic() - t0
    return 100 * o / (w * os.cpu_count()), o, w


def noisy(reason):
    """The result is marked noisy, for reason (into the shell side's file when a script runs us)."""
    path = os.environ.get("BENCH_NOISY_FILE")
    if path:
        with open(path, "a") as f:
            f.write(reason + "\n")
    else:
        _reasons.append(reason)


def begin(name):
    """Waits for any other bench (unless the calling script holds the lock) and for the load
    to settle, then names the CPU and the load."""
    global _lock
    if os.environ.get("HPS_BENCH_LOCKED") != "1":
        _lock = open(LOCK, "a")
        try:
            fcntl.flock(_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(f"{name}: waiting for {LOCK} (another bench is running)", file=sys.stderr, flush=True)
            fcntl.flock(_lock, fcntl.LOCK_EX)
        os.environ["HPS_BENCH_LOCKED"] = "1"
    print(f"{name}: cpu: {cpu()}; load at start: {quiet_load('start', settle())}", flush=True)
    global _start
    _start = (time.monotonic(), busy_s(), own_s())


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
    """The CPU other processes used while the runs ran, the load right after them and
    once the bench's own has decayed, and the verdict (only where no script around us gives it)."""
    share, o, w = other()
    after = loadavg().split()[0]
    said = quiet_load("end", settle())
    if os.environ.get("BENCH_NOISY_FILE"):  # the script around us gives the rest
        print(f"{name}: cpu: {cpu()}; load right after the runs: {after}, at end: {said}", flush=True)
        return
    print(f"{name}: cpu: {cpu()}; load right after the runs: {after}, at end: {said}; other processes: "
          f"{share:.1f}% of the CPU ({o:.1f} s of {w:.0f} s on {os.cpu_count()} cores)", flush=True)
    if share > OTHER_MAX:
        noisy(f"other processes used {share:.1f}% of the CPU > {OTHER_MAX:g}%")
    if _reasons:
        print(f"{name}: NOISY: " + "; ".join(dict.fromkeys(_reasons)))
    else:
        print(f"{name}: quiet: load <= {QUIET_LOAD:g} at start and at end; other processes <= {OTHER_MAX:g}% of "
              f"the CPU while it ran; every configuration's runs within {100 * SPREAD_MAX:.0f}% (sd/mean)")
