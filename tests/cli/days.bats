#!/usr/bin/env bats
# Day by day (hps-train(1), DAY BY DAY and DELTA EXPORTS): synthetic days
# with drift, a run continuing the day before's checkpoint, delta exports.

load helpers

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

# the distinct values of Criteo column N (15: the first categorical) of a day
values() { cut -f "$2" "$DAYS/day-0$1" | grep -v '^$' | sort -u; }

@test "days: synth --days writes one file a day, the same for the same seed" {
    "$HPS_BIN/hps-shard" synth 20000 --days 3 --drift 0.2 --seed 5 --scale 0.001 -o "$TMP/again" 2>/dev/null
    for d in 1 2 3; do cmp "$DAYS/day-0$d" "$TMP/again/day-0$d"; done
    [ ! -e "$TMP/again/day-04" ]
    "$HPS_BIN/hps-shard" synth 20000 --days 1 --seed 6 --scale 0.001 -o "$TMP/other" 2>/dev/null
    ! cmp -s "$DAYS/day-01" "$TMP/other/day-01"
    run "$HPS_BIN/hps-shard" synth 100 --days 2
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-shard: error: synth --days: give the output directory (-o DIR)"* ]]
    run "$HPS_BIN/hps-shard" synth 100 --days 2 --drift 1.5 -o "$TMP/x"
    [ "$status" -eq 2 ]
}

@test "days: each day brings new values and drops some of the day before's" {
    # the slots of 2202, 8351 and 10131 values at --scale 0.001
    for col in 18 26 17; do
        values 1 $col > "$TMP/a"
        values 2 $col > "$TMP/b"
        values 3 $col > "$TMP/c"
        new=$(comm -13 "$TMP/a" "$TMP/b" | wc -l)
        gone=$(comm -23 "$TMP/b" "$TMP/c" | wc -l)
        kept=$(comm -12 "$TMP/a" "$TMP/b" | wc -l)
        echo "# column $col: day 2 new $new, kept $kept; day 3 lost $gone" >&3
        [ "$new" -gt 0 ] || return 1
        [ "$gone" -gt 0 ] || return 1
        [ "$kept" -gt 0 ] || return 1
    done
    # no drift: the same values every day (only the rows drawn differ)
    "$HPS_BIN/hps-shard" synth 20000 --days 2 --drift 0 --seed 5 --scale 0.001 -o "$TMP/flat" 2>/dev/null
    cut -f 18 "$TMP/flat/day-01" | sort -u > "$TMP/a"
    cut -f 18 "$TMP/flat/day-02" | sort -u > "$TMP/b"
    ! cmp -s "$TMP/flat/day-01" "$TMP/flat/day-02"
    flat=$(comm -13 "$TMP/a" "$TMP/b" | wc -l)
    drift=$(comm -13 <(values 1 18) <(values 2 18) | wc -l)
    echo "# column 18: new on day 2 without drift $flat, with $drift" >&3
    [ "$flat" -lt "$drift" ]
}

@test "days: --continue-from carries tables and optimizer state: two days on one day's data are two epochs" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --epochs 2 \
        --export "$TMP/two-epochs.safetensors"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --checkpoint "$TMP/c1"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --continue-from "$TMP/c1" \
        --export "$TMP/two-days.safetensors" --metrics "$TMP/m.ndjson"
    cmp "$TMP/two-epochs.safetensors" "$TMP/two-days.safetensors"
    [ "$(json_field "$TMP/m.ndjson" 'd["day"]')" = 2 ]
    [ "$(json_field "$TMP/m.ndjson" 'd["steps"]')" = 158 ]
}

@test "days: a next day keeps every row of the day before, and --steps counts the day's" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --checkpoint "$TMP/c1" \
        --export "$TMP/e1.safetensors"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --checkpoint "$TMP/c2" --steps 5 --export "$TMP/e2.safetensors" --metrics "$TMP/m.ndjson"
    [ "$status" -eq 0 ]
    [[ "$output" == *"hps-train: continuing $TMP/c1/ckpt-000000000079.hpsckpt: day 2, from step 79"* ]]
    [[ "$output" != *"warning"* ]]
    [ "$(json_field "$TMP/m.ndjson" 'd["steps"]')" = 84 ]
    export_keys "$TMP/e1.safetensors" > "$TMP/k1"
    export_keys "$TMP/e2.safetensors" > "$TMP/k2"
    [ "$(comm -23 <(sort "$TMP/k1") <(sort "$TMP/k2") | wc -l)" -eq 0 ]
    [ "$(comm -13 <(sort "$TMP/k1") <(sort "$TMP/k2") | wc -l)" -gt 0 ]
    # day 3 from day 2's directory: the day goes on counting
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s3" --threads 1 --continue-from "$TMP/c2" \
        --steps 1 --metrics "$TMP/m3.ndjson"
    [ "$(json_field "$TMP/m3.ndjson" 'd["day"]')" = 3 ]
}

@test "days: a continued day killed and resumed ends like a whole one" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --checkpoint "$TMP/c1"
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --export "$TMP/whole.safetensors"
    HPS_TRAIN_KILL_AT_STEP=100 run "$HPS_TEST_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" \
        --threads 1 --continue-from "$TMP/c1" --checkpoint "$TMP/c2" --checkpoint-every 10
    [ "$status" -eq 137 ]
    "$HPS_TEST_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --checkpoint "$TMP/c2" --resume --export "$TMP/resumed.safetensors"
    cmp "$TMP/whole.safetensors" "$TMP/resumed.safetensors"
    # --steps counts the day's steps, resumed too: 79 of day 1, then 30 of day 2 (killed at 100)
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --steps 30 --export "$TMP/whole30.safetensors" --metrics "$TMP/w.ndjson"
    HPS_TRAIN_KILL_AT_STEP=100 run "$HPS_TEST_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" \
        --threads 1 --continue-from "$TMP/c1" --checkpoint "$TMP/c3" --checkpoint-every 10 --steps 30
    [ "$status" -eq 137 ]
    "$HPS_TEST_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s2" --threads 1 --continue-from "$TMP/c1" \
        --checkpoint "$TMP/c3" --resume --steps 30 --export "$TMP/resumed30.safetensors" --metrics "$TMP/r.ndjson"
    cmp "$TMP/whole30.safetensors" "$TMP/resumed30.safetensors"
    [ "$(json_field "$TMP/r.ndjson" 'd["steps"]')" = 109 ]
}

@test "days: --continue-from refuses another model, another plan, and its own directory" {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --steps 2 --checkpoint "$TMP/c1"
    run "$HPS_BIN/hps-train" --model "$TESTDATA/models/dlrm-small.json" --data "$DAYS/s2" --continue-from "$TMP/c1"
    [ "$status" -ne 0 ]
    [[ "$output" == "hps-train: error: "* ]]
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$MODEL" --reps 1 --warmup 0 --no-scaling \
        --estimate "$TESTDATA/devices/gpu-t4.json" -o "$TMP/p.json"
    "$HPS_BIN/hps-plan" -m "$MODEL" -c "$TESTDATA/clusters/lab.json" -p "$TMP/p.json" \
        --min-throughput 10 --algo fixed:cpu -o "$TMP/plan.json"
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --model "$MODEL" --data "$DAYS/s2" --threads 1 \
        --continue-from "$TMP/c1"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: $TMP/c1/ckpt-000000000002.hpsckpt: made without a plan (--model alone), this run is under plan sha256:"*"...: a next day continues under the plan that trained the tables" ]]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --continue-from "$TMP/c1" --checkpoint "$TMP/c1"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: --continue-from $TMP/c1: --checkpoint must be another directory"* ]]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --continue-from "$TMP/none"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: --continue-from: $TMP/none: No such file or directory" ]]
    mkdir "$TMP/empty"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s2" --continue-from "$TMP/empty"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: --continue-from: $TMP/empty: holds no checkpoint" ]
}

# three days, each with its export and its delta against the day before's
three_days() {
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s1" --threads 1 --steps 20 --checkpoint "$TMP/c1" \
        --export "$TMP/e1.safetensors"
    for d in 2 3; do
        "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s$d" --threads 1 --steps 20 \
            --continue-from "$TMP/c$((d - 1))" --checkpoint "$TMP/c$d" --export "$TMP/e$d.safetensors" \
            --delta "$TMP/d$d.delta" --delta-since "$TMP/e$((d - 1)).safetensors"
    done
}

@test "days: base + deltas rebuild the last export byte for byte; a delta holds changed rows only" {
    three_days
    "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/d2.delta" "$TMP/d3.delta" -o "$TMP/full.safetensors"
    cmp "$TMP/e3.safetensors" "$TMP/full.safetensors"
    (cd "$TMP" && sha256sum -c full.safetensors.sha256)
    "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/d2.delta" -o "$TMP/two.safetensors"
    cmp "$TMP/e2.safetensors" "$TMP/two.safetensors"
    # a delta against the same export holds nothing
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s3" --threads 1 --steps 1 --continue-from "$TMP/c3" \
        --export "$TMP/e4.safetensors" --delta "$TMP/d4.delta" --delta-since "$TMP/e3.safetensors"
    python3 - "$TMP/d4.delta" "$TMP/e3.safetensors" <<'PY'
import json, struct, sys
def header(p):
    b = open(p, "rb").read()
    return json.loads(b[8:8 + struct.unpack_from("<Q", b)[0]])
d, e = header(sys.argv[1]), header(sys.argv[2])
assert d["__metadata__"]["format"] == "hps-delta", d["__metadata__"]
rows = lambda h: sum(v["shape"][0] for k, v in h.items() if k.endswith(".keys"))
# one step touches a batch's keys: far fewer rows than the table holds
assert 0 < rows(d) < rows(e) / 2, (rows(d), rows(e))
PY
}

@test "days: export-apply names a wrong order, a missing link, another base and a corrupted delta" {
    three_days
    run "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/d3.delta" "$TMP/d2.delta" -o "$TMP/x"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: $TMP/d3.delta: out of order: $TMP/d2.delta comes before it" ]
    run "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/d2.delta" "$TMP/d2.delta" -o "$TMP/x"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: $TMP/d2.delta: applies to an earlier export of the chain (sha256:"*"): out of order" ]]
    run "$HPS_BIN/hps-train" export-apply "$TMP/e2.safetensors" "$TMP/d2.delta" -o "$TMP/x"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: $TMP/d2.delta: applies to sha256:"*", but the base is sha256:"*": another base" ]]
    "$HPS_BIN/hps-train" -q --model "$MODEL" --data "$DAYS/s3" --threads 1 --steps 1 --continue-from "$TMP/c3" \
        --export "$TMP/e4.safetensors" --delta "$TMP/d4.delta" --delta-since "$TMP/e3.safetensors"
    run "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/d2.delta" "$TMP/d4.delta" -o "$TMP/x"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: $TMP/d4.delta: applies to sha256:"*", but the chain is at sha256:"*": a delta is missing" ]]
    # a flipped byte in a row: the result is not the export the delta names
    cp "$TMP/d2.delta" "$TMP/bad.delta"
    size=$(stat -c %s "$TMP/bad.delta")
    printf '\x7f' | dd of="$TMP/bad.delta" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
    run "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/bad.delta" -o "$TMP/x"
    [ "$status" -eq 1 ]
    [[ "$output" == "hps-train: error: $TMP/bad.delta: makes sha256:"*", not the sha256:"*" it names: the delta is corrupted" ]]
    [ ! -e "$TMP/x" ]
    # an export is no delta
    run "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors" "$TMP/e2.safetensors" -o "$TMP/x"
    [ "$status" -eq 1 ]
    [[ "$output" == "hps-train: error: $TMP/e2.safetensors: not a delta export"* ]]
    run "$HPS_BIN/hps-train" export-apply "$TMP/e1.safetensors"
    [ "$status" -eq 2 ]
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --delta "$TMP/d.delta"
    [ "$status" -eq 2 ]
    [[ "$output" == "hps-train: error: --delta and --delta-since go together"* ]]
    # checked before any training
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$DAYS/s1" --export "$TMP/e.safetensors" \
        --delta "$TMP/d.delta" --delta-since "$TMP/none.safetensors"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-train: error: --delta-since: $TMP/none.safetensors: No such file or directory" ]
    [ ! -e "$TMP/e.safetensors" ]
}
