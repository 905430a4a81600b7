#!/usr/bin/env bats
# hps-train across 3 test hosts (hosts.sh: network namespaces on this
# machine, links shaped by tc, hps-h3's slower): ranks on different hosts
# follow one process, the plan's rankfile runs unchanged, bytes to other
# hosts are measured beside the plan's figure, and a rank killed on another
# host, or a host's link taken down, stops every survivor with a line naming
# the rank, its role and its host.  Run by `make check-cluster` (root).
# Every mpirun runs under `timeout`; ranks use --threads 1 (2 cores).

load ../cli/helpers
load ../cli/dist_helpers
load hosts

TRAIN=$HPS_BIN/hps-train
MODEL=$TESTDATA/models/demo-ctr.json
PLAN=$TESTDATA/plans/plan-dist-2w1s.json   # 2 workers (ranks 0, 1), 1 server (rank 2)

setup_file() {
    local why
    why=$(hosts_unavailable)
    [ -z "$why" ] || skip "$why"
    built_with_mpi "$TRAIN" || skip "hps-train was built without Open MPI (make MPI=0)"
    hosts_up 3 3
    echo "# $HOSTS_SAID" >&3
}

teardown_file() {
    hosts_down
}

setup() {
    mpi_test_env
    TMP=$(mktemp -d)
    export HPS_CLUSTER_JOB=$TMP # marks this test's ranks (rank_pids)
    "$HPS_BIN/hps-shard" synth 4000 -o "$TMP/x.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -m "$MODEL" -n 2 -o "$TMP/shards" "$TMP/x.tsv" 2>/dev/null
    # one rank per host: rank 0 on hps-h1, 1 on hps-h2, 2 on hps-h3
    printf 'rank %d=hps-h%d slot=0\n' 0 1 1 2 2 3 > "$TMP/one-per-host"
}

teardown() {
    rm -rf "$TMP"
}

mpi_hosts() {
    timeout 120 bash -c 'source "$0"; hosts_mpirun "$@"' "$BATS_TEST_DIRNAME/hosts.bash" \
        --oversubscribe "$@"
}

@test "cluster: workers and a server on 3 hosts follow the single-process loss trajectory" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi_hosts --rankfile "$TMP/one-per-host" "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 \
        --threads 1 --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    [ "$(dist_field "$TMP/dist.ndjson" '[r["host"] for r in o["per_rank"]]')" = "['hps-h1', 'hps-h2', 'hps-h3']" ]
    # every rank talks to ranks on other hosts only
    [ "$(dist_field "$TMP/dist.ndjson" 'all(r["bytes_cross_node"] == r["bytes_sent"] > 0 for r in o["per_rank"])')" = True ]
}

@test "cluster: stages on different hosts follow one process, and --eval gives its evaluation" {
    "$TRAIN" --plan "$PLAN" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --eval "$TMP/shards" --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    mpi_hosts --rankfile "$TMP/one-per-host" "$TRAIN" --plan "$TESTDATA/plans/plan-dist-2s-3r.json" \
        --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 --eval "$TMP/shards" \
        --metrics "$TMP/dist.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    same_evals "$TMP/one.ndjson" "$TMP/dist.ndjson"
    # stage 0 (hps-h1) sent its activations to stage 1 on hps-h2
    [ "$(dist_field "$TMP/dist.ndjson" 'o["per_rank"][0]["bytes_cross_node"] > 1e6')" = True ]
}

# A cluster whose nodes are the test hosts: 2 CPU units on hps-h1, 1 on the
# others (the hosts share this machine's 2 cores: a rankfile slot must be 0
# or 1), so that the plan's workers and server take all three.
hosts_cluster() {
    python3 - "$TESTDATA/clusters/lab.json" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["resources"] = [r for r in c["resources"] if r["kind"] == "cpu"]
c["links"] = []
c["nodes"] = [{"name": "hps-h%d" % i, "units": {"cpu": 2 if i == 1 else 1}} for i in (1, 2, 3)]
json.dump(c, open(sys.argv[2], "w"))
PY
}

@test "cluster: the plan's rankfile runs unchanged on its nodes; cross-host bytes measured beside the plan's" {
    hosts_cluster "$TMP/hosts.json"
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TMP/hosts.json" -p "$TESTDATA/profiles/demo-ctr.json" \
        --min-throughput 40000 --rankfile "$TMP/ranks" -o "$TMP/plan.json"
    cat "$TMP/ranks"
    # ranks on all three hosts
    [ "$(cut -d= -f2 "$TMP/ranks" | cut -d' ' -f1 | sort -u | wc -l)" -eq 3 ]
    "$HPS_BIN/hps-shard" -m "$MODEL" --plan "$TMP/plan.json" -o "$TMP/ps" "$TMP/x.tsv" 2>/dev/null
    run mpi_hosts --rankfile "$TMP/ranks" "$TRAIN" --plan "$TMP/plan.json" --data "$TMP/ps" \
        --epochs 2 --threads 1 --metrics "$TMP/m.ndjson"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(dist_field "$TMP/m.ndjson" 'o["placed_as_planned"]')" = True ]
    [[ "$output" =~ "bytes/step to other hosts: "[0-9]+" measured, the plan predicts "[0-9]+ ]]
    [[ "$output" == *"rank 0 on hps-h1: "* ]]
    # measured and predicted (the plan's model of the same traffic) within 2x
    dist_field "$TMP/m.ndjson" '(o["cross_host_bytes_per_step"], o["predicted_cross_host_bytes_per_step"])'
    [ "$(dist_field "$TMP/m.ndjson" \
        '0.5 < o["cross_host_bytes_per_step"] / o["predicted_cross_host_bytes_per_step"] < 2')" = True ]
}

# The pids of this test's ranks: "RANK PID" lines.
rank_pids() {
    local p e r
    for p in $(pgrep -f "$HPS_TEST_BIN/hps-train"); do
        e=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null) || continue
        grep -qx "HPS_CLUSTER_JOB=$TMP" <<< "$e" || continue
        r=$(grep -oP '^OMPI_COMM_WORLD_RANK=\K[0-9]+' <<< "$e") && echo "$r $p"
    done
    return 0 # mpirun and its shell match the pattern too, without a rank
}

# Seconds until every pid given has stopped (exited: gone, or a zombie its
# Open MPI daemon has not reaped yet), or "alive" after 10 s.
all_gone() {
    local t0 p alive
    t0=$(date +%s.%N)
    for _ in $(seq 100); do
        alive=0
        for p in "$@"; do
            [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo gone)" != Z ] &&
                kill -0 "$p" 2>/dev/null && alive=1
        done
        [ "$alive" = 0 ] && { awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.1f\n", a - b}'; return; }
        sleep 0.1
    done
    echo alive
}

# A job with a checkpoint every 2 steps, rank 0 slowed so that it runs a
# while; then FAULT (a command) on rank 2's host (hps-h3: the server); the
# survivors must stop within 10 s and the job's output name the server.
fault_on_server() {
    args=(--plan "$PLAN" --data "$TMP/shards" --threads 1 --checkpoint "$TMP/ck" --checkpoint-every 2)
    mpi_hosts --rankfile "$TMP/one-per-host" "$HPS_TEST_BIN/hps-train" "${args[@]}" --epochs 40 --slowdown 0=4 \
        > "$TMP/out" 2>&1 &
    job=$!
    for _ in $(seq 300); do [ -f "$TMP/ck/committed" ] && break; sleep 0.1; done
    [ -f "$TMP/ck/committed" ]
    rank_pids > "$TMP/pids"
    [ "$(wc -l < "$TMP/pids")" -eq 3 ]
    "$@" "$(awk '$1 == 2 {print $2}' "$TMP/pids")"
    gone=$(all_gone $(awk '$1 != 2 {print $2}' "$TMP/pids"))
    echo "# survivors stopped after: $gone s" >&3
    hosts_link 3 up
    status=0
    wait "$job" || status=$?
    cat "$TMP/out"
    [ "$gone" != alive ]
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ]   # ended, and not by the timeout
    [ "$(grep -c "hps-train: error: rank 2 (server 0) on host hps-h3 stopped responding" "$TMP/out")" -eq 1 ]
    # the committed checkpoint is whole: every rank's file of that step
    step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$TMP/ck/committed")
    for r in 0 1 2; do [ -f "$TMP/ck/rank-$r/ckpt-$(printf %012d "$step").hpsckpt" ]; done
    run mpi_hosts --rankfile "$TMP/one-per-host" "$TRAIN" "${args[@]}" --epochs 3 --resume
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming at step $step"* ]]
    [[ "$output" == *"12 steps, 12000 samples"* ]]
}

kill_rank() { kill -9 "$1"; }
link_down() { hosts_link 3 down; }

@test "cluster: a rank killed on another host stops every survivor, named with role and host; resume continues" {
    fault_on_server kill_rank
}

@test "cluster: a host's link going down stops every survivor, named with role and host; resume continues" {
    fault_on_server link_down
}
