#!/usr/bin/env bats
# Tables that live for months (hps-train(1), TABLES): admission, expiry,
# their state in checkpoints, on synthetic days with drift.

load helpers
load dist_helpers

setup_file() {
    synth_days "$BATS_FILE_TMPDIR/days"
}

setup() {
    TMP=$(mktemp -d)
    MODEL=$TESTDATA/models/criteo-small.json
}

teardown() {
    rm -rf "$TMP"
}

# a summary's tables: "rows expired evictions admitted_share" a line
summary_tables() {
    json_field "$1" '"\n".join("%d %d %d %s" % (t["rows"], t["expired"], t["evictions"], t["admitted_share"]) for t in d["tables"])'
}

@test "tables: --admit-after N: keys seen fewer than N times get no row; the admitted share is reported per epoch" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 \
        --export "$TMP/all.safetensors" --metrics "$TMP/all.ndjson"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --admit-after 3 \
        --export "$TMP/adm.safetensors" --metrics "$TMP/adm.ndjson"
    export_keys "$TMP/all.safetensors" | sort > "$TMP/k-all"
    export_keys "$TMP/adm.safetensors" | sort > "$TMP/k-adm"
    # fewer rows, every one of them a key the unbounded run has too
    [ "$(wc -l < "$TMP/k-adm")" -gt 0 ]
    [ "$(wc -l < "$TMP/k-adm")" -lt "$(wc -l < "$TMP/k-all")" ]
    [ "$(comm -13 "$TMP/k-all" "$TMP/k-adm" | wc -l)" -eq 0 ]
    # the epoch record: each table's admitted share, below 1 with admission, 1 without
    python3 - "$TMP/adm.ndjson" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ep = [r for r in recs if r["event"] == "epoch"]
assert len(ep) == 1, ep
shares = [t["admitted_share"] for t in ep[0]["tables"]]
assert shares and all(0 < s < 1 for s in shares), shares
PY
    [ "$(json_field "$TMP/all.ndjson" 'min(t["admitted_share"] for t in d["tables"])')" = 1.0 ]
    # a threshold no key reaches: no row at all, every lookup reads zeros
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --admit-after 65535 \
        --metrics "$TMP/none.ndjson"
    [ "$(json_field "$TMP/none.ndjson" 'sum(t["rows"] for t in d["tables"])')" = 0 ]
    [ "$(json_field "$TMP/none.ndjson" 'max(t["admitted_share"] for t in d["tables"])')" = 0.0 ]
}

@test "tables: --expire-after-days D: a new day removes rows untouched D days" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --checkpoint "$TMP/c1" \
        --export "$TMP/e1.safetensors"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --checkpoint "$TMP/c2" --expire-after-days 1 --export "$TMP/e2.safetensors"
    # day 2 removes nothing: day 1's rows are one day old
    [ "$(export_keys "$TMP/e2.safetensors" | sort | comm -23 <(export_keys "$TMP/e1.safetensors" | sort) - | wc -l)" -eq 0 ]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c2" \
        --expire-after-days 1 --export "$TMP/e3.safetensors" --metrics "$TMP/m3.ndjson" --steps 1
    [ "$status" -eq 0 ]
    [[ "$output" == *"day 3: embedding layer '"*"': "*" rows untouched for 1 days expired"* ]]
    expired=$(json_field "$TMP/m3.ndjson" 'sum(t["expired"] for t in d["tables"])')
    [ "$expired" -gt 0 ]
    # the rows day 3 kept were touched on day 2 (or its one step): fewer than day 2 ended with
    [ "$(export_keys "$TMP/e3.safetensors" | wc -l)" -lt "$(export_keys "$TMP/e2.safetensors" | wc -l)" ]
    # without --expire-after-days day 3 keeps them all
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c2" \
        --export "$TMP/e3-all.safetensors" --metrics "$TMP/m3-all.ndjson" --steps 1
    [ "$(json_field "$TMP/m3-all.ndjson" 'sum(t["expired"] for t in d["tables"])')" = 0 ]
}

@test "tables: a day with admission, expiry, row-wise AdaGrad and fp16 rows killed and resumed ends bit for bit like a whole one" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --admit-after 2 --sparse-optimizer rowwise-adagrad --row-dtype fp16 --checkpoint "$TMP/c1"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --admit-after 2 --sparse-optimizer rowwise-adagrad --row-dtype fp16 --expire-after-days 1 --checkpoint "$TMP/c2"
    # day 3 expires day 1's rows, then trains on candidates counted since day 1
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s3" --threads 1 --continue-from "$TMP/c2" \
        --admit-after 2 --sparse-optimizer rowwise-adagrad --row-dtype fp16 --expire-after-days 1 --export "$TMP/whole.safetensors" --metrics "$TMP/whole.ndjson"
    [ "$(json_field "$TMP/whole.ndjson" 'sum(t["expired"] for t in d["tables"])')" -gt 0 ]
    HPS_TRAIN_KILL_AT_STEP=180 run "$HPS_TEST_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s3" \
        --threads 1 --continue-from "$TMP/c2" --admit-after 2 --sparse-optimizer rowwise-adagrad --row-dtype fp16 --expire-after-days 1 \
        --checkpoint "$TMP/c3" --checkpoint-every 10
    [ "$status" -eq 137 ]
    "$HPS_TEST_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s3" --threads 1 --continue-from "$TMP/c2" \
        --admit-after 2 --sparse-optimizer rowwise-adagrad --row-dtype fp16 --expire-after-days 1 --checkpoint "$TMP/c3" --resume \
        --export "$TMP/resumed.safetensors" --metrics "$TMP/resumed.ndjson"
    cmp "$TMP/whole.safetensors" "$TMP/resumed.safetensors"
    [ "$(summary_tables "$TMP/whole.ndjson")" = "$(summary_tables "$TMP/resumed.ndjson")" ]
}

@test "tables: --admit-after and --expire-after-days are refused where they cannot run" {
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --admit-after 0
    [ "$status" -eq 2 ]
    [[ "$output" == *"--admit-after"* ]]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --expire-after-days x
    [ "$status" -eq 2 ]
    [[ "$output" == *"--expire-after-days"* ]]
}

@test "tables: --sparse-optimizer rowwise-adagrad: one accumulator a row, smaller tables; a checkpoint keeps its kind" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --metrics "$TMP/elem.ndjson"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --sparse-optimizer rowwise-adagrad \
        --checkpoint "$TMP/c1" --metrics "$TMP/row.ndjson" --eval "$DAYS/s2"
    # the same rows in fewer bytes, and a model that learned
    [ "$(json_field "$TMP/elem.ndjson" 'sum(t["rows"] for t in d["tables"])')" = \
      "$(json_field "$TMP/row.ndjson" 'sum(t["rows"] for t in d["tables"])')" ]
    python3 -c "import sys; assert float(sys.argv[1]) < float(sys.argv[2])" \
        "$(json_field "$TMP/row.ndjson" 'sum(t["mib"] for t in d["tables"])')" \
        "$(json_field "$TMP/elem.ndjson" 'sum(t["mib"] for t in d["tables"])')"
    python3 -c "import sys; assert float(sys.argv[1]) > 0.5" "$(json_field "$TMP/row.ndjson" 'd["eval"]["auc"]')"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" --steps 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"ckpt-000000000079.hpsckpt: embedding layer "*" was trained with row-wise AdaGrad, this run asks for per-element (--sparse-optimizer)"* ]]
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" --steps 1 \
        --sparse-optimizer rowwise-adagrad
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --sparse-optimizer rowwise
    [ "$status" -eq 2 ]
    [[ "$output" == *"--sparse-optimizer"* ]]
}

@test "tables: row-wise AdaGrad, admission and fp16 rows under mpirun (2 workers, 1 server) follow one process" {
    command -v mpirun >/dev/null || skip "mpirun is not installed (make deps: openmpi-bin)"
    built_with_mpi "$HPS_BIN/hps-train" || skip "hps-train was built without Open MPI (make MPI=0)"
    mpi_test_env
    plan=$TESTDATA/plans/plan-dist-2w1s.json
    demo=$TESTDATA/models/demo-ctr.json
    "$HPS_BIN/hps-shard" synth 4000 -o "$TMP/x.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$demo" -n 2 -o "$TMP/shards" "$TMP/x.tsv"
    "$HPS_BIN/hps-train" --plan "$plan" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --sparse-optimizer rowwise-adagrad --metrics "$TMP/one.ndjson" --metrics-interval 0 -q
    "$HPS_BIN/hps-train" --plan "$plan" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        --metrics "$TMP/elem.ndjson" --metrics-interval 0 -q
    timeout 120 mpirun --oversubscribe -np 3 "$HPS_BIN/hps-train" --plan "$plan" --data "$TMP/shards" \
        --epochs 3 --threads 1 --sparse-optimizer rowwise-adagrad --metrics "$TMP/dist.ndjson" \
        --metrics-interval 0 -q
    same_losses "$TMP/one.ndjson" "$TMP/dist.ndjson"
    run same_losses "$TMP/elem.ndjson" "$TMP/dist.ndjson" # per-element AdaGrad trains otherwise
    [ "$status" -ne 0 ]
    # the server's tables admit and store fp16 as one process's: a key's
    # lookups are counted wherever its worker's slice has them
    tables="--admit-after 3 --row-dtype fp16 --sparse-optimizer rowwise-adagrad"
    "$HPS_BIN/hps-train" --plan "$plan" --data "$TMP/shards" --epochs 3 --threads 1 --micro-batches 2 \
        $tables --metrics "$TMP/one-adm.ndjson" --metrics-interval 0 -q
    timeout 120 mpirun --oversubscribe -np 3 "$HPS_BIN/hps-train" --plan "$plan" --data "$TMP/shards" \
        --epochs 3 --threads 1 $tables --metrics "$TMP/dist-adm.ndjson" --metrics-interval 0 -q
    same_losses "$TMP/one-adm.ndjson" "$TMP/dist-adm.ndjson"
    run same_losses "$TMP/one.ndjson" "$TMP/dist-adm.ndjson" # admission trains otherwise
    [ "$status" -ne 0 ]
}

# every epoch record's and the summary's tables, a line a table: the
# figures as they are (rows, evictions, expired, mib, admitted_share)
tables_figures() {
    python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["event"] in ("epoch", "summary") and "tables" in r:
        for t in r["tables"]:
            print(r["event"], r.get("epoch", ""), json.dumps(t, sort_keys=True))
PY
}

# a plan of one worker (rank 0) and one server (rank 1), into $TMP/1w1s.json
plan_1w1s() {
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["workers"]=p["workers"][:1]
p["workers"][0]["share"]=1; p["stages"][0]["units"]=1; p["servers"]["ranks"]=[1]
json.dump(p,open(sys.argv[2],"w"))' "$TESTDATA/plans/plan-dist-2w1s.json" "$TMP/1w1s.json"
}

@test "tables: a worker and a server under mpirun export one process's tables and report its tables' figures, day after day (--continue-from)" {
    command -v mpirun >/dev/null || skip "mpirun is not installed (make deps: openmpi-bin)"
    built_with_mpi "$HPS_BIN/hps-train" || skip "hps-train was built without Open MPI (make MPI=0)"
    mpi_test_env
    demo=$TESTDATA/models/demo-ctr.json
    plan_1w1s
    # 13 steps of each day (same_losses wants 12), not 20: it trains 5 times
    # a day, and expiry and admission show on them as on the whole day
    for d in 1 2 3; do
        head -n 12800 "$DAYS/day-0$d" > "$TMP/day-0$d"
        "$HPS_BIN/hps-shard" -q -m "$demo" -o "$TMP/s$d" "$TMP/day-0$d"
    done
    opts=(--plan "$TMP/1w1s.json" --model "$demo" --threads 1 --admit-after 2 --row-dtype fp16
          --sparse-optimizer rowwise-adagrad --metrics-interval 0)
    "$HPS_BIN/hps-train" "${opts[@]}" -q --data "$TMP/s1" --checkpoint "$TMP/o1" --export "$TMP/o1.st" \
        --metrics "$TMP/o1.ndjson"
    timeout 120 mpirun --oversubscribe -np 2 "$HPS_BIN/hps-train" "${opts[@]}" -q --data "$TMP/s1" \
        --checkpoint "$TMP/d1" --export "$TMP/d1.st" --metrics "$TMP/d1.ndjson"
    same_losses "$TMP/o1.ndjson" "$TMP/d1.ndjson"
    cmp "$TMP/o1.st" "$TMP/d1.st"
    [ "$(tables_figures "$TMP/o1.ndjson")" = "$(tables_figures "$TMP/d1.ndjson")" ]
    for d in 2 3; do
        p=$((d - 1))
        # day 3 in two epochs: the second epoch's admitted share counts its own lookups
        "$HPS_BIN/hps-train" "${opts[@]}" --data "$TMP/s$d" --continue-from "$TMP/o$p" --expire-after-days 1 \
            --epochs $p --checkpoint "$TMP/o$d" --export "$TMP/o$d.st" --metrics "$TMP/o$d.ndjson" 2> "$TMP/o$d.err"
        timeout 120 mpirun --oversubscribe -np 2 "$HPS_BIN/hps-train" "${opts[@]}" --data "$TMP/s$d" \
            --continue-from "$TMP/d$p" --expire-after-days 1 --epochs $p --checkpoint "$TMP/d$d" \
            --export "$TMP/d$d.st" --metrics "$TMP/d$d.ndjson" 2> "$TMP/d$d.err"
        same_losses "$TMP/o$d.ndjson" "$TMP/d$d.ndjson"
        cmp "$TMP/o$d.st" "$TMP/d$d.st"
        # the servers' tables, as one process's: rows, bytes, admitted share, expired
        tables_figures "$TMP/o$d.ndjson" > "$TMP/o$d.tables"
        tables_figures "$TMP/d$d.ndjson" > "$TMP/d$d.tables"
        diff "$TMP/o$d.tables" "$TMP/d$d.tables"
        # the expiry line on the lead's stderr, as one process says it
        diff <(grep 'rows untouched' "$TMP/o$d.err") <(grep 'rows untouched' "$TMP/d$d.err")
    done
    # day 3 expired rows (one process says how many), so the servers did too
    [ "$(json_field "$TMP/o3.ndjson" 'sum(t["expired"] for t in d["tables"])')" -gt 0 ]
    grep -q "day 3: embedding layer 'emb': [0-9]* rows untouched for 1 days expired" "$TMP/d3.err"
    python3 -c 'import sys; s = [l.split(" ", 2) for l in open(sys.argv[1])]
rows = [int(__import__("json").loads(x[2])["rows"]) for x in s]
share = [__import__("json").loads(x[2])["admitted_share"] for x in s]
assert len(s) == 3 and min(rows) > 0 and all(0 < a < 1 for a in share), s' "$TMP/d3.tables"
    # a day's checkpoints under mpirun continue under mpirun with the same ranks
    run timeout 120 mpirun --oversubscribe -np 2 "$HPS_BIN/hps-train" "${opts[@]}" -q --data "$TMP/s2" \
        --continue-from "$TMP/o1"
    [ "$status" -ne 0 ]
    [[ "$output" == *"$TMP/o1: holds the checkpoints of one process"* ]]
    mkdir "$TMP/empty"
    run timeout 120 mpirun --oversubscribe -np 2 "$HPS_BIN/hps-train" "${opts[@]}" -q --data "$TMP/s2" \
        --continue-from "$TMP/empty"
    [ "$status" -ne 0 ]
    [[ "$output" == *"--continue-from: $TMP/empty: holds no committed checkpoint of an mpirun job"* ]]
}

@test "tables: --admit-after N,SLOT=N under mpirun (a worker and a server) exports one process's tables" {
    command -v mpirun >/dev/null || skip "mpirun is not installed (make deps: openmpi-bin)"
    built_with_mpi "$HPS_BIN/hps-train" || skip "hps-train was built without Open MPI (make MPI=0)"
    mpi_test_env
    demo=$TESTDATA/models/demo-ctr.json
    plan_1w1s
    "$HPS_BIN/hps-shard" -q -m "$demo" -o "$TMP/s1" "$DAYS/day-01"
    opts=(--plan "$TMP/1w1s.json" --model "$demo" --threads 1 --metrics-interval 0 -q --data "$TMP/s1")
    "$HPS_BIN/hps-train" "${opts[@]}" --admit-after 2 --export "$TMP/two.st"
    "$HPS_BIN/hps-train" "${opts[@]}" --admit-after 2,C3=20 --export "$TMP/o.st" --metrics "$TMP/o.ndjson"
    timeout 120 mpirun --oversubscribe -np 2 "$HPS_BIN/hps-train" "${opts[@]}" --admit-after 2,C3=20 \
        --export "$TMP/d.st" --metrics "$TMP/d.ndjson"
    cmp "$TMP/o.st" "$TMP/d.st"
    [ "$(tables_figures "$TMP/o.ndjson")" = "$(tables_figures "$TMP/d.ndjson")" ]
    # C3's own threshold holds: fewer of its keys than at 2, the other slots' the same
    export_keys "$TMP/two.st" | sort > "$TMP/k-two"
    export_keys "$TMP/d.st" | sort > "$TMP/k-d"
    [ "$(grep -c '\.C3\.keys ' "$TMP/k-d")" -lt "$(grep -c '\.C3\.keys ' "$TMP/k-two")" ]
    diff <(grep -v '\.C3\.keys ' "$TMP/k-two") <(grep -v '\.C3\.keys ' "$TMP/k-d")
}

@test "tables: --row-dtype fp16 and bf16 store rows in half the bytes, export fp32, and a checkpoint keeps the type" {
    for t in fp32 fp16 bf16; do
        "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --row-dtype $t \
            --sparse-optimizer rowwise-adagrad --checkpoint "$TMP/c-$t" --export "$TMP/$t.safetensors" \
            --metrics "$TMP/$t.ndjson" --eval "$DAYS/s2"
    done
    mib() { json_field "$TMP/$1.ndjson" 'sum(t["mib"] for t in d["tables"])'; }
    rows() { json_field "$TMP/$1.ndjson" 'sum(t["rows"] for t in d["tables"])'; }
    [ "$(rows fp16)" = "$(rows fp32)" ] && [ "$(rows bf16)" = "$(rows fp32)" ]
    python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); assert b < a and c == b, (a, b, c)" \
        "$(mib fp32)" "$(mib fp16)" "$(mib bf16)"
    # the next-day quality of compact rows is that of fp32's, near enough
    python3 -c "import sys; a, b = map(float, sys.argv[1:]); assert abs(a - b) < 0.01 * a, (a, b)" \
        "$(json_field "$TMP/fp32.ndjson" 'd["eval"]["logloss"]')" "$(json_field "$TMP/fp16.ndjson" 'd["eval"]["logloss"]')"
    # exports are fp32, the same keys; fp16 rows' values are fp16 numbers
    [ "$(export_keys "$TMP/fp16.safetensors")" = "$(export_keys "$TMP/fp32.safetensors")" ]
    python3 - "$TMP/fp16.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", b)[0]
h = json.loads(b[8:8 + n])
w = [v for k, v in h.items() if k.endswith(".keys")]
assert w
for k in (k for k in h if k.endswith(".keys")):
    v = h[k[:-len(".keys")] + ".weight"]
    assert v["dtype"] == "F32", v
    s, e = v["data_offsets"]
    for (x,) in struct.iter_unpack("<f", b[8 + n + s:8 + n + e]):
        assert struct.unpack("<e", struct.pack("<e", x))[0] == x, x
PY
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c-fp16" \
        --sparse-optimizer rowwise-adagrad --steps 1
    [ "$status" -eq 2 ]
    [[ "$output" == *"has fp16 rows, this run asks for fp32 (--row-dtype)"* ]]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --row-dtype int8
    [ "$status" -eq 2 ]
    [[ "$output" == *"--row-dtype"* ]]
}

@test "tables: hps-train trains the plan's tables (row type, sparse optimizer, admission); an option that differs is an error" {
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --min-time 0 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" > "$TMP/p.json"
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/p.json" --min-throughput 10 \
        --algo fixed:cpu --row-dtype fp16 --sparse-optimizer rowwise-adagrad --admit-after 3 -o "$TMP/plan.json"
    [ "$(json_field "$TMP/plan.json" 'd["tables"]["row_dtype"], d["tables"]["admit_after"]')" = "fp16 3" ]
    # no option: the plan's tables, as if each were asked for
    "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DAYS/s1" --threads 1 --steps 20 -q \
        --export "$TMP/plan.st" --checkpoint "$TMP/c" --metrics "$TMP/plan.ndjson"
    "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DAYS/s1" --threads 1 --steps 20 -q \
        --row-dtype fp16 --sparse-optimizer rowwise-adagrad --admit-after 3 --export "$TMP/asked.st"
    cmp "$TMP/plan.st" "$TMP/asked.st"
    python3 -c "import sys; assert float(sys.argv[1]) < 1" \
        "$(json_field "$TMP/plan.ndjson" 'max(t["admitted_share"] for t in d["tables"])')"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --threads 1 --checkpoint "$TMP/c" --resume \
        --steps 21 --row-dtype fp16
    [ "$status" -eq 2 ]
    [[ "$output" == *"was trained with row-wise AdaGrad, this run asks for per-element"* ]]
    # an option that differs from the plan: an error naming it and the plan's value
    for bad in "--row-dtype bf16|row_dtype is 'fp16', but --row-dtype asks for 'bf16'" \
               "--row-dtype fp32|row_dtype is 'fp16', but --row-dtype asks for 'fp32'" \
               "--sparse-optimizer adagrad|sparse_optimizer is 'rowwise-adagrad', but --sparse-optimizer asks for 'adagrad'" \
               "--admit-after 2|admit_after is 3, but --admit-after asks for 2" \
               "--admit-after 3,C3=5|admit_after is 3 for every slot, but --admit-after asks for thresholds per slot"; do
        run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$DAYS/s1" --steps 1 ${bad%%|*}
        [ "$status" -eq 2 ]
        [[ "$output" == *"hps-train: error: "*"plan.json: tables: ${bad#*|}: leave it out"* ]]
    done
    # a plan without tables (before hps-plan priced them, or by hand): the options as given
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); del p["tables"]; json.dump(p,open(sys.argv[2],"w"))' \
        "$TMP/plan.json" "$TMP/old.json"
    "$HPS_BIN/hps-train" --plan "$TMP/old.json" --data "$DAYS/s1" --threads 1 --steps 1 -q --row-dtype bf16 \
        --metrics "$TMP/old.ndjson"
}

@test "tables: --admit-after N,SLOT=N: a slot's own threshold beside the others'" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --export "$TMP/all.st"
    export_keys "$TMP/all.st" | sort > "$TMP/k-all"
    [ "$(grep -c '\.C3\.keys ' "$TMP/k-all")" -gt 0 ]
    # C3 admits on a 65535th lookup (never here), every other slot at once
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --admit-after C3=65535 \
        --export "$TMP/no-c3.st" --metrics "$TMP/no-c3.ndjson"
    export_keys "$TMP/no-c3.st" | sort > "$TMP/k-no-c3"
    [ "$(grep -c '\.C3\.keys ' "$TMP/k-no-c3")" -eq 0 ]
    diff <(grep -v '\.C3\.keys ' "$TMP/k-all") "$TMP/k-no-c3"
    python3 -c "import sys; assert 0 < float(sys.argv[1]) < 1" \
        "$(json_field "$TMP/no-c3.ndjson" 'min(t["admitted_share"] for t in d["tables"])')"
    # the other way round: the default never admits, C3 at once
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --admit-after 65535,C3=1 \
        --export "$TMP/c3.st"
    diff <(grep '\.C3\.keys ' "$TMP/k-all") <(export_keys "$TMP/c3.st" | sort)
    # bad items: exit status 2 naming the item
    for bad in "C99=2|'C99': $MODEL has no slot of that name" "C3=0|'C3=0': expected N or SLOT=N" \
               "2,C3=x|'C3=x': expected N or SLOT=N" "C3=2,C3=3|slot 'C3' is given twice"; do
        run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --steps 1 --admit-after "${bad%%|*}"
        [ "$status" -eq 2 ]
        [[ "$output" == *"hps-train: error: --admit-after: ${bad#*|}"* ]]
    done
}

@test "tables: a table sized for the manifest's distinct keys never rehashes, and exports what one that doubles does" {
    "$HPS_BIN/hps-train" -v --model "$MODEL" --data "$DAYS/s1" --threads 1 --epochs 2 \
        --export "$TMP/sized.safetensors" --metrics "$TMP/sized.ndjson" 2> "$TMP/sized.log"
    grep -q "embedding layer [0-9]*: table sized for [0-9]* rows" "$TMP/sized.log"
    # every table of the run, none rehashed (they hold thousands of rows: doubled from 1024 they would)
    [ "$(grep -c "rows, rehashed" "$TMP/sized.log")" -gt 0 ]
    [ "$(grep "rows, rehashed" "$TMP/sized.log" | grep -vc "rehashed 0 times")" -eq 0 ]
    [ "$(json_field "$TMP/sized.ndjson" 'max(t["rows"] for t in d["tables"])')" -gt 2048 ]
    # the same shards, their manifest without its key statistics (its digest recomputed): the tables double
    cp -r "$DAYS/s1" "$TMP/nostats"
    python3 - "$TMP/nostats/manifest.json" <<'PY'
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
del m["slots"]
zero = "sha256:" + "0" * 64
m["sha256"] = zero
text = json.dumps(m, indent=2) + "\n"
open(sys.argv[1], "w").write(text.replace(zero, "sha256:" + hashlib.sha256(text.encode()).hexdigest()))
PY
    "$HPS_BIN/hps-train" -v --model "$MODEL" --data "$TMP/nostats" --threads 1 --epochs 2 \
        --export "$TMP/grown.safetensors" 2> "$TMP/grown.log"
    ! grep -q "table sized for" "$TMP/grown.log"
    grep "rows, rehashed" "$TMP/grown.log" | grep -vq "rehashed 0 times"
    cmp "$TMP/sized.safetensors" "$TMP/grown.safetensors"
}
