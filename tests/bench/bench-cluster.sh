#!/bin/bash
# make bench-cluster: hps-train across 3 test hosts (tests/cluster/hosts.bash:
# network namespaces on this machine, links shaped by tc; root).  Not in
# make check.
#   1. placement: one plan (6 workers, 1 server; nodes of 3, 2 and 2 CPU units)
#      run with the plan's rankfile and with round robin (rank r on host
#      r mod 3); per step: bytes to other hosts as hps-train counts them, as
#      the hosts' interfaces counted them (kernel tx bytes, all traffic:
#      MPI, the watch, Open MPI's runtime), the plan's prediction for that
#      placement, and epoch time.
#   2. one slowed link (hps-h3 at 100 Mbit/s, the others 1 Gbit/s): the
#      plan's 3 workers and server on the 3 hosts, re-balanced shares against
#      the plan's static ones.
# The test hosts share this machine's 2 cores: rankfile slots are folded
# onto cores 0-1, and epoch times hold CPU contention between 7 ranks.
set -eu
BIN=${1:?usage: bench-cluster.sh BIN_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROWS=${ROWS:-16000}
EPOCHS=${EPOCHS:-2}
source "$ROOT/tests/cluster/hosts.bash"
why=$(hosts_unavailable)
[ -z "$why" ] || { echo "bench-cluster: skipped: $why"; exit 0; }
. "$ROOT/tests/bench/bench_common.sh"
bench_begin bench-cluster
TMP=$(mktemp -d)
trap 'hosts_down; rm -rf "$TMP" "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"' EXIT
MODEL=$ROOT/testdata/models/demo-ctr.json
"$BIN/hps-shard" synth "$ROWS" -o "$TMP/x.tsv" 2>/dev/null

# cluster UNITS OUT: nodes hps-h1..3 with UNITS CPU units ("2,1,1": per host)
cluster() {
    python3 - "$ROOT/testdata/clusters/lab.json" "$1" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["resources"] = [r for r in c["resources"] if r["kind"] == "cpu"]
c["links"] = []
u = [int(x) for x in sys.argv[2].split(",")] * 3
c["nodes"] = [{"name": "hps-h%d" % i, "units": {"cpu": u[i - 1]}} for i in (1, 2, 3)]
json.dump(c, open(sys.argv[3], "w"))
PY
}

plan() { # NAME UNITS MIN_THROUGHPUT
    cluster "$2" "$TMP/$1-cluster.json"
    "$BIN/hps-plan" -m "$MODEL" -c "$TMP/$1-cluster.json" -p "$ROOT/testdata/profiles/demo-ctr.json" \
        --min-throughput "$3" --rankfile "$TMP/$1.ranks" -o "$TMP/$1.json" 2>/dev/null
    "$BIN/hps-shard" -m "$MODEL" --plan "$TMP/$1.json" -o "$TMP/$1-shards" "$TMP/x.tsv" 2>/dev/null
    awk '{split($3, s, "="); print $1, $2, "slot=" s[2] % 2}' "$TMP/$1.ranks" > "$TMP/r"
    mv "$TMP/r" "$TMP/$1.ranks"
}

tx_bytes() { # the hosts' interfaces: bytes sent, all three
    local t=0 i
    for i in 1 2 3; do
        t=$((t + $(ip netns exec "hps-h$i" cat /sys/class/net/eth0/statistics/tx_bytes)))
    done
    echo "$t"
}

run() { # NAME PLAN RANKFILE ARGS...
    local name=$1 p=$2 rf=$3 before
    shift 3
    before=$(tx_bytes)
    timeout 900 bash -c 'source "$0"; hosts_mpirun "$@"' "$ROOT/tests/cluster/hosts.bash" \
        --oversubscribe --rankfile "$rf" "$BIN/hps-train" --plan "$TMP/$p.json" --model "$MODEL" \
        --data "$TMP/$p-shards" --epochs "$EPOCHS" --threads 1 --metrics "$TMP/$name.ndjson" -q "$@" \
        2>&1 | grep -v 'setpgid' >&2 || true
    echo $(($(tx_bytes) - before)) > "$TMP/$name.tx"
}

# 1. placement, links all alike
hosts_up 3
echo "bench-cluster: $HOSTS_SAID" >&2
plan place 3,2,2 70000
n=$(wc -l < "$TMP/place.ranks")
awk -v n="$n" 'BEGIN {for (r = 0; r < n; r++) printf "rank %d=hps-h%d slot=%d\n", r, r % 3 + 1, int(r / 3) % 2}' \
    > "$TMP/rr.ranks"
run planned place "$TMP/place.ranks" --no-rebalance
run rr place "$TMP/rr.ranks" --no-rebalance
run planned2 place "$TMP/place.ranks" --no-rebalance
run rr2 place "$TMP/rr.ranks" --no-rebalance

# 2. hps-h3's link slowed; 3 workers, one per host
hosts_up 3 3
echo "bench-cluster: $HOSTS_SAID" >&2
plan slow 2,1,1 40000
run static slow "$TMP/slow.ranks" --no-rebalance
run rebal slow "$TMP/slow.ranks"
run static2 slow "$TMP/slow.ranks" --no-rebalance
run rebal2 slow "$TMP/slow.ranks"

python3 - "$TMP" "$EPOCHS" <<'PY'
import json, sys
tmp, epochs = sys.argv[1], int(sys.argv[2])
def load(name):
    recs = [json.loads(l) for l in open(f"{tmp}/{name}.ndjson")]
    summ = [r for r in recs if r["event"] == "summary"][-1]
    dist = [r for r in recs if r["event"] == "dist"][-1]
    tx = int(open(f"{tmp}/{name}.tx").read())
    return summ, dist, tx
plan = json.load(open(f"{tmp}/place.json"))["placement"]
print("demo-ctr, batch 1024, --threads 1; 3 test hosts (network namespaces) on one 2-core machine;")
print("pairs run alternately (A B A B); figures per run, separated by ';'")
print()
print("| placement | ranks per host | cross-host bytes/step: plan predicts | hps-train counted | interfaces measured | epoch s |")
print("|---|---|---|---|---|---|")
for label, runs, pred in (("plan's (co-located)", ("planned", "planned2"), plan["cross_node_bytes_per_step"]),
                          ("round robin", ("rr", "rr2"), plan["round_robin_bytes_per_step"])):
    res = [load(n) for n in runs]
    hosts = {}
    for r in res[0][1]["per_rank"]:
        hosts.setdefault(r["host"], []).append(("s" if r["role"] == "server" else "w") + str(r["rank"]))
    per = " ".join(f"{h}:{','.join(v)}" for h, v in sorted(hosts.items()))
    counted = "; ".join(f'{d["cross_host_bytes_per_step"] / 1e6:.2f} MB' for s, d, tx in res)
    measured = "; ".join(f'{tx / s["steps"] / 1e6:.2f} MB' for s, d, tx in res)
    ep = "; ".join(f'{s["seconds"] / epochs:.2f}' for s, d, tx in res)
    print(f"| {label} | {per} | {pred / 1e6:.2f} MB | {counted} | {measured} | {ep} |")
print()
print("| hps-h3 link 100 Mbit/s (others 1 Gbit/s) | final shares of workers 0/1/2 | epoch s | slowest worker's compute s/epoch | wait s/epoch per worker |")
print("|---|---|---|---|---|")
for label, runs in (("static shares", ("static", "static2")), ("re-balanced", ("rebal", "rebal2"))):
    res = [load(n) for n in runs]
    shares = "; ".join("/".join(f'{r["share"]:.2f}' for r in d["per_rank"] if r["role"] == "worker") for s, d, tx in res)
    ep = "; ".join(f'{s["seconds"] / epochs:.2f}' for s, d, tx in res)
    crit = "; ".join(f'{d["critical_s"] / epochs:.2f}' for s, d, tx in res)
    wait = "; ".join("/".join(f'{r["wait_s"] / epochs:.2f}' for r in d["per_rank"] if r["role"] == "worker") for s, d, tx in res)
    print(f"| {label} | {shares} | {ep} | {crit} | {wait} |")
PY
bench_end
