#!/usr/bin/env python3
"""make bench-fidelity: does a plan predict its run?  usage:
bench_fidelity.py BIN_DIR WORK_DIR

On this machine, per model (dlrm-criteo, demo-ctr, the dense-only mlp-784):
hps-profile measures it (cpu:2, with 1 and 2 threads), hps-plan plans on clusters that
describe this machine (CPU types of 1 and 2 threads), hps-train runs each plan
(one process, or under mpirun with the plan's workers and servers) and its
summary gives predicted and measured samples/s.  Each configuration runs RUNS
times (3), in rounds, each run long enough for BENCH_MIN_S seconds (5) at the
plan's predicted rate (steps = seconds x rate / batch), and the mean of its
runs counts.  With key statistics from the shards, each CTR model also runs with its rows in
device memory on the CPU backend: a type of kind gpu on this machine's CPU
(hps-train --cpu-fallback runs it there, the rows in the CPU backend's
arena), with memory for every table (rows hbm) and for a tenth of the rows
(rows cache), and, where the data names fewer keys, for a tenth of its
distinct keys; the cache's hit rate, predicted and measured, is printed too.
Prints the CPU and the load at start and end, per configuration
predicted, measured (mean +- sd) and the error, then the median and maximum absolute error, and the
ranking check: among the candidate plans that fit this machine, for limits
between their predicted rates, is the planner's pick (the least predicted
cost a sample that meets the limit) the measured-cheapest plan that meets
it.  Noisy (bench_common.py): the load above 1 at start or at end (the
bench's own decayed), other processes above 5% of the CPU while it ran, or
one configuration's runs spread more than BENCH_SPREAD_MAX (5%, sd/mean);
the summary says so.

The machine's pace: on a shared VM the machine runs faster or slower from
one minute to the next, and a plan is priced at the pace of its profile's
minutes, so a run's error mixes the plan's with the machine's drift.  A pace
reference, a fixed run of the model alone (hps-train --model: one CPU stage,
no plan) of about PACE_S seconds (0.4; 0: none), is timed twice on 1 and 2
threads just before and twice just after each model's profile (a thread
count's four, their mean, is the profile's pace, the base of every pace of
the model), then right before each run of each round on the run's cores (1
or 2: its ranks or stages times their threads).  The reference runs the
engine, the reader and the layers the runs run, so its rate moves as theirs.
A reading is the reference's rate then over its rate at the profile; a run's
pace the mean of its round's readings on the model and cores (the minute or
so those runs take: a drift over minutes stays, the reference's jitter of a
second averages out); a configuration's pace the mean over its runs.  Its
own rows follow the verdict, never replacing it: each configuration's pace
(mean and sd/mean), its samples/s with the pace taken out (each run's over
its pace, the mean of them) and that error, the ranking on those figures,
their median and max error, the pace's spread (around each profile, over all
runs, within a configuration's runs, the readings within a round: the
reference's own jitter) and whether the runs spread less with it taken out,
and what the reference cost.  The raw targets stay the verdict; the adjusted
figures say what the error would be had the machine kept the profile's pace."""
import json
import math
import os
import statistics
import socket
import subprocess
import sys
import time

import bench_common

BIN, WORK = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("MODELS", "dlrm-criteo demo-ctr mlp-784").split()
SECONDS = float(os.environ.get("BENCH_MIN_S", "5"))  # each run, at the plan's predicted rate
STEPS_MIN = 50  # and never fewer steps: the first ones warm up
ROWS = int(os.environ.get("ROWS", "60000"))
NIC_GBPS = float(os.environ.get("NIC_GBPS", "40"))
MPI = os.environ.get("MPI", "1") == "1"
REPS = os.environ.get("REPS", "20")  # hps-profile's repetitions, at least
PROFILE_S = os.environ.get("PROFILE_S", "3")  # and its --min-time: each layer timed over seconds
MPI_TIMEOUT = 300
PACE_S = float(os.environ.get("PACE_S", "0.4"))  # the pace reference's run, seconds; 0: no pace
PACE_STEPS_MIN = 5  # its steps, at least (demo-ctr's batch takes 0.1 s)
PACE_AROUND = 2  # its readings on each side of a profile, each thread count: the base of every pace of the model
TARGETS = {"median": 0.10, "max": 0.25, "ranking": 0.90}


def sh(args, **kw):
    return subprocess.run(args, check=True, **kw)


def load():
    return bench_common.loadavg()


CORES = os.cpu_count()


def cluster(path, types, max_units, node=None):
    """CPU types on this machine; types: [(name, device, threads, price)];
    node: the units this machine holds (its cores), as nodes[] of hps-cluster(5).
    The servers are units of the first type (they take cores too)."""
    res = [{"name": n, "kind": "cpu", "device": d, "threads": t, "price_per_hour": p,
            "max_units": max_units, "nic_gbps": NIC_GBPS, "mem_gib": 8} for n, d, t, p in types]
    doc = {"format": "hps-cluster", "version": 1, "name": "here", "resources": res,
           "servers": {"type": types[0][0], "gbps": NIC_GBPS}}
    if node:
        doc["nodes"] = [{"name": socket.gethostname(), "units": node}]
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


# 1 thread at $1/h, 2 threads at $1.8/h: a second core is worth it only when it
# gains 80%; a and b: two 1-thread types, for plans of two stages.  Every type
# is the device cpu:2, whose thread scaling hps-plan fits (on cpu:1 the
# parallel fraction is 0 and more units never help in the model)
ONE, TWO = ("t1", "cpu:2", 1, 1.0), ("t2", "cpu:2", 2, 1.8)
A, B = ("a", "cpu:2", 1, 1.0), ("b", "cpu:2", 1, 1.05)
# g: a gpu type on this machine's CPU, for rows in device memory.  A GPU
# type is priced with its device's times as profiled, cpu:2's at 2 threads
# (hps-plan scales only CPU types to their threads), so hps-train runs it on
# 2 threads: run on 1, demo-ctr's hbm and cache rows measured half the rate
# their plans predicted
G = ("g", "cpu:2", 2, 1.0)
THREADS = {t[0]: t[2] for t in (ONE, TWO, A, B, G)}
G_DEVICE = "cpu:2-as-gpu"  # the cpu:2 profile's measurements as a device of kind gpu


def gpu_cluster(path, mem_bytes):
    """One unit of g with mem_bytes of device memory, and t1 for the servers'
    type (a cache plan's servers: in one process they are not started).  g's
    device is G_DEVICE (gpu_profile)."""
    doc = {"format": "hps-cluster", "version": 1, "name": "here-g",
           "resources": [{"name": G[0], "kind": "gpu", "device": G_DEVICE, "threads": G[2], "price_per_hour": G[3],
                          "max_units": 1, "nic_gbps": NIC_GBPS, "mem_gib": mem_bytes / 2 ** 30},
                         {"name": ONE[0], "kind": "cpu", "device": ONE[1], "threads": ONE[2],
                          "price_per_hour": ONE[3], "max_units": 1, "nic_gbps": NIC_GBPS, "mem_gib": 8}],
           "servers": {"type": ONE[0], "gbps": NIC_GBPS}}
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def data(name):
    d = f"{WORK}/{name}"
    if os.path.isdir(f"{d}/shards"):
        return d
    os.makedirs(d, exist_ok=True)
    model = f"{ROOT}/testdata/models/{name}.json"
    if name.startswith("mlp"):
        with open(f"{d}/rows.svm", "w") as f:
            sh(["/usr/bin/python3", f"{ROOT}/tests/bench/make_dense_libsvm.py", str(ROWS // 3), "1"], stdout=f)
        sh([f"{BIN}/hps-shard", "-q", "-f", "libsvm", "--classes", "10", "--dense", "784", "--transform",
            "none", "-m", model, "-o", f"{d}/shards", f"{d}/rows.svm"])
    else:
        if not os.path.exists(f"{WORK}/criteo.tsv"):
            sh([f"{BIN}/hps-shard", "synth", str(ROWS), "--seed", "1", "-o", f"{WORK}/criteo.tsv"],
               stderr=subprocess.DEVNULL)
        sh([f"{BIN}/hps-shard", "-q", "-m", model, "-o", f"{d}/shards", f"{WORK}/criteo.tsv"])
    return d


def plan(name, d, cl, limit, algo, out, micro=None, objective="cost", more=(), ranks=False):
    """The plan, priced for `micro` micro-batches (hps-train's default, one a stage, when None);
    ranks: with its rankfile, OUT.ranks (the cluster names this machine's node)."""
    model = f"{ROOT}/testdata/models/{name}.json"
    extra = (["--micro-batches", str(micro)] if micro else []) + ["--objective", objective] + list(more)
    extra += ["--rankfile", f"{out}.ranks"] if ranks else []
    r = subprocess.run([f"{BIN}/hps-plan", "-q", "-m", model, "-c", cl, "-p", f"{d}/profile.json",
                        "-t", str(limit), "-a", algo, "-o", out] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        return None
    with open(out) as f:
        p = json.load(f)
    return p if p.get("feasible") else None


def layout(p):
    return tuple((s["type"], s["layers"][0], s["layers"][1], s["units"]) for s in p["stages"]) + (
        p["servers"]["count"],)


RUNS = int(os.environ.get("RUNS", "3"))  # runs of each configuration, in rounds; the median is reported
JOBS = {}  # (model, layout, micro, mpi) -> the runs of one configuration


def steps_of(name, p):
    """The model's batch, and the steps of a run of BENCH_MIN_S seconds at the plan's predicted rate."""
    with open(f"{ROOT}/testdata/models/{name}.json") as f:
        batch = json.load(f)["batch"]
    return batch, max(STEPS_MIN, math.ceil(SECONDS * p["predicted"]["throughput"] / batch))


def run_samples(name, d, cl, out, p, stats):
    """p planned again for the samples its run trains (--samples): a cache's
    predicted hit rate counts each cached row's first lookup of the run,
    which depends on the run's length (hps-plan(1), MEMORY)."""
    batch, steps = steps_of(name, p)
    return plan(name, d, cl, 1, "fixed:g", out, 1, more=stats + ["--samples", str(steps * batch)]) if p else p


def job(name, d, plan_path, p, micro, mpi=False, tag=None, rankfile=None):
    """A configuration to run RUNS times: under mpirun when a stage has
    several units, the plan has servers and mpi is set, or mpi is set; else in
    one process, its stages as threads.  The same configuration asked for
    twice is run once (tag tells apart plans of one layout: device rows of
    several sizes).  rankfile: the plan's (hps-plan --rankfile), mpirun's
    placement; a server beside a unit then takes its last core, which the
    plan prices (hps-plan(1), MEMORY), so the worker runs one thread fewer."""
    key = (name, layout(p), micro, mpi, tag)
    if key not in JOBS:
        threads = THREADS[p["stages"][0]["type"]]
        if rankfile and any(s.get("servers_beside") for s in p["stages"]):
            threads = max(1, threads - 1)
        # data-parallel units are ranks; stages of one unit each run as threads
        # of one process.  Under mpirun the ranks are the plan's workers and
        # servers: a dense-only model's plan has no server (hps-train(1), DISTRIBUTED)
        ranks = len(p["workers"]) + p["servers"]["count"]
        distributed = mpi or any(s["units"] > 1 for s in p["stages"])
        batch, steps = steps_of(name, p)
        fallback = any(s.get("kind") == "gpu" for s in p["stages"])  # g runs on this CPU
        # the cores the run keeps busy, those its pace is timed on: ranks or
        # stages (threads of one process) times each one's threads
        cores = min(max(pace_threads()), (ranks if distributed else len(p["stages"])) * threads)
        JOBS[key] = {"args": (d, plan_path, micro, threads, ranks if distributed else 0, steps, fallback,
                              rankfile if distributed else None), "plan": p,
                     "micro": micro, "runs": [], "readings": [], "cores": cores, "threads": threads}
    return key


def measured_hit(summary):
    """The cache's hit rate in hps-train's summary (hps-train(1), ROWS: its
    `rows` entry a stage with device rows): hits over lookups of the stages
    with a cache; None without one."""
    caches = [r for r in summary.get("rows") or [] if r.get("rows") == "cache"]
    lookups = sum(r["lookups"] for r in caches)
    return sum(r["hits"] for r in caches) / lookups if lookups else None


def on_cores(args, cores):
    """args run on the machine's first `cores` cores (taskset) where it has
    more: a one-process configuration gets the cores its type has, which the
    plan prices, reader's thread included (hps-plan(1)); unpinned, that thread
    took an idle core of this machine the type does not have (mlp-784's
    1-thread unit, whose reader decodes 784 floats a row, ran 9-19% above its
    plan in every run).  mpirun binds its ranks itself."""
    return (["taskset", "-c", f"0-{cores - 1}"] if cores < CORES else []) + args


def run_once(d, plan_path, micro, threads, ranks, steps, fallback, rankfile, cores):
    metrics = f"{plan_path}.m{micro}.ndjson"
    if os.path.exists(metrics):
        os.remove(metrics)
    args = [f"{BIN}/hps-train", "-q", "--plan", plan_path, "--data", f"{d}/shards", "--epochs", "1000",
            "--steps", str(steps), "--threads", str(threads), "--micro-batches", str(micro),
            "--metrics", metrics] + (["--cpu-fallback"] if fallback else [])
    if ranks:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        args = ["timeout", str(MPI_TIMEOUT), "mpirun", "--oversubscribe", "-np", str(ranks)] + (
            ["--rankfile", rankfile] if rankfile else []) + args
        sh(args, env=env, stdout=subprocess.DEVNULL)
    else:
        sh(on_cores(args, cores))
    recs = [json.loads(line) for line in open(metrics)]
    s = [r for r in recs if r["event"] == "summary"][-1]
    return {"measured": s["samples_per_s"], "predicted": s["predicted_samples_per_s"],
            "stages": [(st["measured_ms"], st["predicted_ms"]) for st in s["stages"]],
            "ranks": max(ranks, 1), "threads": threads, "hit": measured_hit(s)}


PACE = {}  # model -> {"steps": N, "base": {threads: samples/s at the profile}, "around": {threads: ([before], [after])}}
PACE_COST = [0.0]  # seconds the reference took, of the bench's


def pace_args(name, d, threads, steps, metrics):
    """The pace reference's command: the model alone (hps-train --model: one
    CPU stage, no plan, its tables in the process) on `threads` threads for
    `steps` steps from the shards' start, the same work every time."""
    if os.path.exists(metrics):
        os.remove(metrics)
    return [f"{BIN}/hps-train", "-q", "--model", f"{ROOT}/testdata/models/{name}.json", "--data", f"{d}/shards",
            "--epochs", "1000", "--steps", str(steps), "--threads", str(threads), "--metrics", metrics]


def summary_rate(metrics):
    return [json.loads(line) for line in open(metrics) if '"summary"' in line][-1]["samples_per_s"]


def pace_rate(name, d, threads, steps):
    """The pace reference's samples/s on the machine's first `threads` cores."""
    metrics = f"{d}/pace.ndjson"
    t0 = time.monotonic()
    sh(on_cores(pace_args(name, d, threads, steps, metrics), threads))
    PACE_COST[0] += time.monotonic() - t0
    return summary_rate(metrics)


def cores_together(name, d):
    """Two 1-thread references at once, on cores 0 and 1, each over one alone
    on core 0 just before (PACE_AROUND pairs): what a core gives while the
    other works too.  A plan prices each unit of a type as its own machine,
    so two 1-thread units here (two stages, a worker and its server, two
    workers) each run at the profile's 1-thread pace in the plan; on a VM
    whose two vCPUs share a physical core or a busy host's, not in the run."""
    if name not in PACE or CORES < 2:
        return
    pc, ratios = PACE[name], []
    for _ in range(PACE_AROUND):
        alone = pace_rate(name, d, 1, pc["steps"])  # (it counts its own time)
        outs = [f"{d}/together{c}.ndjson" for c in (0, 1)]
        t0 = time.monotonic()
        procs = [subprocess.Popen(["taskset", "-c", str(c)] + pace_args(name, d, 1, pc["steps"], outs[c]))
                 for c in (0, 1)]
        if any([p.wait() for p in procs]):  # both waited for
            raise subprocess.CalledProcessError(1, "hps-train (the pace reference, two at once)")
        PACE_COST[0] += time.monotonic() - t0
        ratios += [summary_rate(o) / alone for o in outs]
    pc["together"] = ratios


def pace_threads():
    """The reference's thread counts: 1, and 2 where the machine has them
    (every configuration here runs on one core or two)."""
    return sorted({1, min(2, CORES)})


def pace_before_profile(name, d):
    """Sizes the reference (PACE_S seconds at the rate of a first run of
    PACE_STEPS_MIN steps, which also brings the shards into the page cache)
    and times it just before the profile."""
    if PACE_S <= 0:
        return
    with open(f"{ROOT}/testdata/models/{name}.json") as f:
        batch = json.load(f)["batch"]
    rate = pace_rate(name, d, 1, PACE_STEPS_MIN)
    steps = max(PACE_STEPS_MIN, round(PACE_S * rate / batch))
    PACE[name] = {"steps": steps, "around": {t: ([], []) for t in pace_threads()}}
    pace_around(name, d, 0)


def pace_around(name, d, side):
    """PACE_AROUND readings a thread count, the thread counts in turn, on one
    side of the profile (0: before, 1: after): every pace of the model is
    over their mean, so a reading's jitter must not set it."""
    pc = PACE[name]
    for _ in range(PACE_AROUND):
        for t, sides in pc["around"].items():
            sides[side].append(pace_rate(name, d, t, pc["steps"]))


def pace_after_profile(name, d):
    """Times the reference again just after the profile: the mean of the
    readings before and after is the machine's pace in the profile's
    minutes, the pace the plans were priced at."""
    if name not in PACE:
        return
    pace_around(name, d, 1)
    pc = PACE[name]
    pc["base"] = {t: statistics.mean(a + b) for t, (a, b) in pc["around"].items()}


def pace_now(key):
    """The machine's pace now against the profile's minutes, on the cores a
    configuration's run takes (None without a reference): the reference's
    rate now over its rate around the profile."""
    name, j = key[0], JOBS[key]
    if name not in PACE:
        return None
    pc = PACE[name]
    return pace_rate(name, j["args"][0], j["cores"], pc["steps"]) / pc["base"][j["cores"]]


def run_jobs():
    """Every configuration once a round, RUNS rounds: a slow spell of the
    machine then touches each configuration alike, not one of them RUNS times."""
    for r in range(RUNS):
        for key, j in JOBS.items():
            j["readings"].append(pace_now(key))  # right before the run
            j["runs"].append(run_once(*j["args"], j["cores"]))
        print(f"  round {r + 1} of {RUNS}: {len(JOBS)} runs, load {load()}", file=sys.stderr, flush=True)


def result(key):
    """The mean samples/s of the runs and their sd; the stage ms of the run of median samples/s."""
    runs = sorted(JOBS[key]["runs"], key=lambda r: r["measured"])
    res = dict(runs[(len(runs) - 1) // 2])
    res["measured"], res["sd"], res["cv"] = bench_common.stats([r["measured"] for r in runs])
    return res


def paces(key):
    """The pace of each of a configuration's runs: the mean of the readings
    of its round on the same model and cores.  They sample the minute or so
    that the round's runs of the model take, so their mean follows a drift
    over minutes (the profile's minutes against the runs') and averages out
    the reference's own jitter of a second.  None without a reference."""
    j = JOBS[key]
    if not j["readings"] or None in j["readings"]:
        return None
    group = [k for k in JOBS if k[0] == key[0] and JOBS[k]["cores"] == j["cores"]]
    return [statistics.mean(JOBS[k]["readings"][r] for k in group) for r in range(len(j["readings"]))]


def adjusted(key):
    """A configuration's runs with the pace taken out: each run's samples/s
    over its pace, what it would have measured at the profile's pace.
    {pace, pace_cv: the mean pace and its sd/mean; measured, cv: the
    adjusted samples/s' mean and sd/mean}; None without a pace."""
    xs = paces(key)
    if xs is None:
        return None
    pace, _, pace_cv = bench_common.stats(xs)
    measured, _, cv = bench_common.stats([r["measured"] / x for r, x in zip(JOBS[key]["runs"], xs)])
    return {"pace": pace, "pace_cv": pace_cv, "measured": measured, "cv": cv}


def describe(p, micro, res):
    st = "+".join(f"{s['type']}x{s['units']}" + (f"/{s['rows']}" if s["rows"] in ("hbm", "cache") else "")
                  for s in p["stages"])
    where = f"mpirun {res['ranks']}/{CORES} cores" if res["ranks"] > 1 else "1 proc"
    return f"{len(p['stages'])} stage {st:11} M={micro} thr={res['threads']} {where:17}"


def execution(p):
    """What a plan runs: its stages' layers, threads and units, and its servers
    (a and t1 are the same 1-thread CPU under two names and prices)."""
    return tuple((s["layers"][0], s["layers"][1], THREADS[s["type"]], s["units"]) for s in p["stages"]) + (
        p["servers"]["count"],)


def candidates(name, d, clusters):
    """The ranking's candidates: on each cluster of this machine, the plan
    cheapest at a low limit and the fastest one (--objective time); one of
    each execution, the cheapest.  Each with its rankfile: the ranks run
    where the plan places them (a server beside a unit on one of its cores,
    as the plan prices it), not wherever Open MPI leaves them."""
    pool = {}
    for tag, cl in clusters:
        for obj in ("cost", "time"):
            path = f"{d}/cand-{tag}-{obj}.json"
            p = plan(name, d, cl, 1, "exact", path, objective=obj, ranks=True)
            if not p:
                continue
            key = execution(p)
            if key not in pool or p["predicted"]["cost_per_hour"] < pool[key][1]["predicted"]["cost_per_hour"]:
                pool[key] = (path, p)
    return list(pool.values())


def ranking_limits(pool):
    """Where the pick changes: halfway (geometric) between the candidates'
    predicted rates, and 0.8 of the slowest.  Beside them the near tie of the
    earlier bench, 1.02 times the cheapest plan's rate: it sits on that plan's
    own prediction, so a few % of noise decides that set."""
    tps = sorted({round(p["predicted"]["throughput"]) for _, p in pool})
    mids = [0.8 * tps[0]] + [(a * b) ** 0.5 for a, b in zip(tps, tps[1:]) if b > 1.01 * a]
    cheapest = min((p for _, p in pool), key=lambda p: p["predicted"]["cost_per_hour"] / p["predicted"]["throughput"])
    return [("between", x) for x in mids] + [("near", 1.02 * cheapest["predicted"]["throughput"])]


def rank_set(pool, keys, limit, measured=lambda key: result(key)["measured"]):
    """The pick: the candidate of least predicted cost a sample that the
    plan says meets the limit (what hps-plan picks among them); the measured
    best: the least measured cost a sample among those measured to meet it
    (measured: a configuration's samples/s, as run or with the pace taken out)."""
    def cheapest(tp_of):
        ok = {i: p["predicted"]["cost_per_hour"] / tp_of(i) for i, (_, p) in enumerate(pool) if tp_of(i) >= limit}
        return min(ok, key=ok.get) if ok else None
    pick = cheapest(lambda i: pool[i][1]["predicted"]["throughput"])
    best = cheapest(lambda i: measured(keys[i]))
    return pick, best


def rank_pool(name, pool, keys, sets, measured=lambda key: result(key)["measured"], label=""):
    """The ranking check at each of the pool's limits (ranking_limits), on the
    figures `measured` gives: each set's hit appended to sets[kind], a line
    printed for it (label: which figures, as the line says)."""
    for kind, limit in ranking_limits(pool):
        pick, best = rank_set(pool, keys, limit, measured)
        if pick is None:
            continue
        hit = pick == best
        sets[kind].append(hit)
        print(f"{name:12} ranking at {limit:9.0f} samples/s ({kind:7}){label}: pick {tag_of(pool[pick][1])}, "
              f"measured best {tag_of(pool[best][1]) if best is not None else 'none'} {'ok' if hit else 'MISS'}")


def gpu_profile(d):
    """The profile with the cpu:2 device again as G_DEVICE of kind gpu: the
    planner prices g with this CPU's measured times, and keeps its rows in
    device memory (hps-plan(1), MEMORY)."""
    with open(f"{d}/profile.json") as f:
        prof = json.load(f)
    dev = dict(next(x for x in prof["devices"] if x["id"] == G[1]), id=G_DEVICE, kind="gpu")
    prof["devices"] = [x for x in prof["devices"] if x["id"] != G_DEVICE] + [dev]
    with open(f"{d}/profile.json", "w") as f:
        json.dump(prof, f)


def device_rows(name, d):
    """The model on g, with the data's key statistics: memory for every table
    (rows hbm), then for the working set and a tenth of the tables (rows
    cache: a tenth of the rows, the model's tables being of one dim).  The
    working set is the stage's memory with its rows on the servers, the
    tables what hbm adds to it.  [(tag, path, plan)]."""
    stats = ["--data-stats", f"{d}/shards"]
    gpu_profile(d)
    big = gpu_cluster(f"{d}/c-g-big.json", 64 * 2 ** 30)
    hbm = plan(name, d, big, 1, "fixed:g", f"{d}/g-hbm.json", 1, more=stats)
    srv = plan(name, d, big, 1, "fixed:g", f"{d}/g-servers.json", 1, more=stats + ["--rows", "servers"])
    if not hbm or not srv or hbm["stages"][0]["rows"] != "hbm":
        print(f"  {name}: device rows: no hbm plan on g, skipped", flush=True)
        return []
    work = srv["stages"][0]["memory"]["used_bytes"]
    tables = hbm["stages"][0]["memory"]["used_bytes"] - work
    small = gpu_cluster(f"{d}/c-g-cache.json", work + 0.1 * tables)
    cache = plan(name, d, small, 1, "fixed:g", f"{d}/g-cache.json", 1, more=stats)
    cache = run_samples(name, d, small, f"{d}/g-cache.json", cache, stats)
    out = [("hbm", f"{d}/g-hbm.json", hbm)]
    if not cache or cache["stages"][0]["rows"] != "cache":
        print(f"  {name}: device rows: no cache plan on g at a tenth of the rows, skipped", flush=True)
        return out
    out.append(("cache", f"{d}/g-cache.json", cache))
    # a tenth of the rows may hold every key the shards name (hash buckets
    # the data never fills): a cache of a tenth of the distinct keys misses
    st = cache["stages"][0]
    row = (st["memory"]["used_bytes"] - work) / st["cache_rows"]
    with open(f"{d}/shards/manifest.json") as f:
        distinct = sum(s["distinct_estimate"] for s in json.load(f)["slots"])
    if 0.1 * distinct < st["cache_rows"]:
        keys = gpu_cluster(f"{d}/c-g-keys.json", work + row * 0.1 * distinct)
        p = plan(name, d, keys, 1, "fixed:g", f"{d}/g-cache-keys.json", 1, more=stats)
        p = run_samples(name, d, keys, f"{d}/g-cache-keys.json", p, stats)
        if p and p["stages"][0]["rows"] == "cache":
            out.append(("cache-keys", f"{d}/g-cache-keys.json", p))
    return out


def tag_of(p):
    return "+".join(f"{s['type']}x{s['units']}" for s in p["stages"]) + (
        f"+{p['servers']['count']}s" if p["servers"]["count"] else "")


def sharing(key):
    """Whether a configuration's run keeps two 1-thread units busy at once:
    two stages, a worker and its server, or two workers, each priced as if
    alone on its machine (cores_together)."""
    j = JOBS[key]
    return j["cores"] >= 2 and j["threads"] == 1


def pace_report(rows, pools, seconds):
    """The pace's own rows: its reference around each profile, each
    configuration's pace and its error with the pace taken out, the ranking
    on those figures, and their summary.  An explanation beside the verdict
    above, which stays the raw figures': what the error would have been had
    the machine kept the profile's pace."""
    print(f"\npace: a fixed run (hps-train --model, the model alone, one CPU stage) of about {PACE_S:g} s, timed "
          f"{PACE_AROUND} times just before and after each profile on 1 and 2 threads (their mean: the profile's pace) "
          f"and right before each run on the run's cores (1 or 2 threads); a run's "
          f"pace is the mean of its round's readings on the model and those cores, each the reference's rate then "
          f"over its rate around the profile (below 1: the machine slower than when profiled); a configuration's "
          f"pace the mean over its runs, its adjusted samples/s the mean of each run's samples/s over its pace")
    for name, pc in PACE.items():
        print(f"{name:12} pace reference, {pc['steps']} steps, each the mean of {PACE_AROUND} readings: " + ", ".join(
            f"{t} thread(s) {statistics.mean(a):.0f}/s before and {statistics.mean(b):.0f}/s after the profile "
            f"({100 * (statistics.mean(b) / statistics.mean(a) - 1):+.1f}%)" for t, (a, b) in pc["around"].items()))
    for name, pc in PACE.items():
        if pc.get("together"):
            xs = pc["together"]
            print(f"{name:12} cores together: two 1-thread references at once, on cores 0 and 1, each ran "
                  f"{statistics.mean(xs):.2f} of one alone on core 0 ({min(xs):.2f} to {max(xs):.2f}, "
                  f"{len(xs)} readings)")
    print(f"{'model':12} {'configuration':52} {'predicted':>10} {'pace':>6} {'sd/mean':>7} {'adjusted':>10} "
          f"{'error':>7}  runs' sd/mean raw, adjusted")
    errs = []
    for name, p, micro, key in rows:
        res, adj = result(key), adjusted(key)
        err = adj["measured"] / res["predicted"] - 1
        errs.append(abs(err))
        print(f"{name:12} {describe(p, micro, res):52} {res['predicted']:10.0f} {adj['pace']:6.3f} "
              f"{100 * adj['pace_cv']:6.1f}% {adj['measured']:10.0f} {100 * err:+6.1f}%  "
              f"{100 * res['cv']:5.1f}% {100 * adj['cv']:5.1f}%")
    sets = {"between": [], "near": []}
    for name, pool, keys in pools:
        rank_pool(name, pool, keys, sets, lambda k: adjusted(k)["measured"], " pace-adjusted")
    between, near = sets["between"], sets["near"]
    # every configuration's runs, the candidates' too: does the pace explain
    # their spread (the adjusted runs spread less) or add its own noise?
    adj = [adjusted(k) for k in JOBS]
    runs = [x for k in JOBS for x in paces(k)]
    raw_cv = statistics.median(result(k)["cv"] for k in JOBS)
    # the reference's own jitter: its readings' spread within one round on
    # one model and cores, a span in which the machine's pace barely moves
    groups = {}
    for (name, *_), j in JOBS.items():
        for r, x in enumerate(j["readings"]):
            groups.setdefault((name, j["cores"], r), []).append(x)
    jitter = [bench_common.stats(xs)[2] for xs in groups.values() if len(xs) > 1]
    print(f"pace over all {len(runs)} runs: median {statistics.median(runs):.3f}, {min(runs):.3f} to "
          f"{max(runs):.3f}; within one configuration's runs (sd/mean) median "
          f"{100 * statistics.median(a['pace_cv'] for a in adj):.1f}%, up to {100 * max(a['pace_cv'] for a in adj):.1f}%; "
          + (f"the reference's readings within a round (sd/mean) median {100 * statistics.median(jitter):.1f}%, up to "
             f"{100 * max(jitter):.1f}%; " if jitter else "") +
          f"the runs' own spread with the pace taken out median {100 * statistics.median(a['cv'] for a in adj):.1f}% "
          f"(raw {100 * raw_cv:.1f}%); the reference took {PACE_COST[0]:.0f} s of the bench's {seconds:.0f} s "
          f"({100 * PACE_COST[0] / seconds:.1f}%)")
    raw = [abs(res["measured"] / res["predicted"] - 1) for res in (result(k) for *_, k in rows)]
    split = {True: ([], []), False: ([], [])}
    for e, r, (*_, k) in zip(errs, raw, rows):
        split[sharing(k)][0].append(r)
        split[sharing(k)][1].append(e)
    if all(split[b][0] for b in split):
        print("median |error|, raw and pace-adjusted, of the configurations whose two 1-thread units share this "
              "machine's cores (cores together, above) and of the others: " + "; ".join(
                  f"{what} {100 * statistics.median(split[b][0]):.1f}% and {100 * statistics.median(split[b][1]):.1f}% "
                  f"({len(split[b][0])})" for b, what in ((True, "sharing"), (False, "the others"))))
    print(f"pace-adjusted (an explanation, not the verdict: what the error would be had the machine kept the "
          f"profile's pace): median |error| {100 * statistics.median(errs):.1f}%, max {100 * max(errs):.1f}%; "
          f"ranking: pick measured-best in {sum(between)} of {len(between)} sets between candidates, {sum(near)} of "
          f"{len(near)} at 1.02 x the cheapest's rate")


def main():
    rows, pools, caches = [], [], []
    start = time.monotonic()
    bench_common.begin("bench-fidelity")
    print(f"bench-fidelity: runs of {SECONDS:g} s at the predicted rate (at least {STEPS_MIN} steps), {RUNS} runs "
          f"a configuration (mean +- sd), NIC {NIC_GBPS:g} Gbit/s in the clusters", flush=True)
    for name in MODELS:
        d = data(name)
        model = f"{ROOT}/testdata/models/{name}.json"
        pace_before_profile(name, d)
        # the engine's overhead and the read timed on the shards the runs read
        sh([f"{BIN}/hps-profile", "-q", "-m", model, "-d", "cpu:2", "-r", REPS, "--min-time", PROFILE_S, "--data", f"{d}/shards",
            "-o", f"{d}/profile.json"])
        pace_after_profile(name, d)
        cores_together(name, d)
        # this machine as it is: its cores hold 1-thread workers and servers
        # alike (a CTR plan's server takes one); the 2-thread cluster gives a
        # server a unit of its own type that this machine does not have
        # besides the worker's (a 2-thread worker and a server need 3 cores)
        c1 = cluster(f"{d}/c-t1.json", [ONE], CORES, {"t1": CORES})
        c2 = cluster(f"{d}/c-t2.json", [TWO], 2)
        base = plan(name, d, c1, 1, "exact", f"{d}/one.json")
        tp1 = base["predicted"]["throughput"]
        cab = cluster(f"{d}/c-ab.json", [A, B], 1, {"a": 1, "b": 1})
        configs = [("one", c1, 1, [1], False, "cost"), ("two", c2, 1, [1], False, "cost")]
        if MPI and base["servers"]["count"]:  # the plan as it is: a worker rank and a server rank
            configs.append(("one", c1, 1, [1], True, "cost"))
        # just above what one unit of t1 reaches: two workers (a dense-only
        # model; a CTR model's server leaves no core for them)
        configs.append(("wide", c1, 1.02 * tp1, [1, 2], True, "cost"))
        # the fastest plan on two 1-thread types: two stages where the model
        # says a pipeline beats one unit.  Run in one process, as threads: a
        # CTR plan's server, a unit of a beyond this machine's cores, is then
        # not started (its tables stay in the process, and hps-train compares
        # with the plan's in-process figures), so only a dense-only model's
        # stages also run as ranks
        if base["servers"]["count"]:
            cab_s = cluster(f"{d}/c-abs.json", [A, B], 2, {"a": 2, "b": 1})
            configs.append(("stages", cab_s, 1, [2, 3, 4], False, "time"))
        else:
            configs.append(("stages", cab, 1, [2, 3, 4], False, "time"))
            if MPI:
                configs.append(("stages", cab, 1, [2], True, "time"))
        for tag, cl, limit, micros, mpi, objective in configs:
            for micro in micros:
                path = f"{d}/{tag}-m{micro}.json"
                p = plan(name, d, cl, limit, "exact", path, micro, objective)
                if not p:  # a larger M may still carry the limit through the bubble
                    print(f"  {name}: {tag}: no plan at {limit:.0f} samples/s with M={micro}", flush=True)
                    continue
                if tag == "stages" and len(p["stages"]) < 2:
                    print(f"  {name}: stages: with M={micro} one stage is the fastest plan on a and b", flush=True)
                    continue
                rows.append((name, p, micro, job(name, d, path, p, micro, mpi)))
        if base["servers"]["count"]:  # a model with tables: its rows on the device
            for tag, path, p in device_rows(name, d):
                key = job(name, d, path, p, 1, tag=tag)
                rows.append((name, p, 1, key))
                if p["stages"][0]["rows"] == "cache":
                    caches.append((name, p, key))
        # the ranking's candidates run as their plans say (a server is a rank),
        # on clusters that hold no more than this machine's cores
        c2n = cluster(f"{d}/c-t2n.json", [TWO], 1, {"t2": CORES // 2})
        pool = candidates(name, d, (("t1", c1), ("t2", c2n), ("ab", cab)))
        if len(pool) < 2:
            print(f"  {name}: ranking: {len(pool)} candidate plan(s) fit this machine's {CORES} cores, skipped",
                  flush=True)
            continue
        keys = [job(name, d, path, p, p["pipeline"]["micro_batches"], p["servers"]["count"] > 0,
                    rankfile=f"{path}.ranks") for path, p in pool]
        pools.append((name, pool, keys))
    run_jobs()
    print()
    print(f"{'model':12} {'configuration':52} {'predicted':>10} {'measured':>10} {'error':>7}  "
          f"{'sd':>8} {'steps':>6}  stage ms (measured/predicted)")
    errs = []
    for name, p, micro, key in rows:
        res = result(key)
        err = res["measured"] / res["predicted"] - 1
        errs.append(abs(err))
        bench_common.spread(f"{name} {tag_of(p)} M={micro} ({res['ranks']} rank(s))",
                            [r["measured"] for r in JOBS[key]["runs"]])
        print(f"{name:12} {describe(p, micro, res):52} {res['predicted']:10.0f} {res['measured']:10.0f} "
              f"{100 * err:+6.1f}%  {res['sd']:8.0f} {JOBS[key]['args'][5]:6}  " +
              " ".join(f"{m:.2f}/{q:.2f}" for m, q in res["stages"]))
    for name, p, key in caches:
        hits = [r["hit"] for r in JOBS[key]["runs"] if r["hit"] is not None]
        st = p["stages"][0]
        print(f"{name:12} cache of {st['cache_rows']} rows: hit rate predicted {st['cache_hit_rate']:.4f}, measured "
              + (f"{statistics.mean(hits):.4f}" if hits else "none (no cache in hps-train's summary)"))
    sets = {"between": [], "near": []}
    print()
    for name, pool, keys in pools:
        print(f"{name:12} candidates: " + ", ".join(
            f"{tag_of(p)} predicted {p['predicted']['throughput']:.0f}/s measured "
            f"{result(k)['measured']:.0f}/s ${p['predicted']['cost_per_hour']:.2f}/h" for (_, p), k in zip(pool, keys)))
        rank_pool(name, pool, keys, sets)
    med, mx = statistics.median(errs), max(errs)
    between, near = sets["between"], sets["near"]
    print(f"\n{len(rows)} configurations, {RUNS} runs each: median |error| {100 * med:.1f}% "
          f"(target <= {100 * TARGETS['median']:.0f}%), max {100 * mx:.1f}% (target <= {100 * TARGETS['max']:.0f}%); "
          f"ranking: pick measured-best in {sum(between)} of {len(between)} sets between candidates "
          f"(target >= {100 * TARGETS['ranking']:.0f}%), {sum(near)} of {len(near)} at 1.02 x the cheapest's rate")
    if PACE:
        pace_report(rows, pools, time.monotonic() - start)
    bench_common.end("bench-fidelity")


main()
