#!/usr/bin/env bats
# Hostile and careless inputs: devices as outputs, full disks, forged files.

load helpers

setup() {
    TMP=$(mktemp -d)
    MODEL=$TESTDATA/models/criteo-small.json
}

teardown() {
    rm -rf "$TMP"
}

@test "robust: -o onto a symlink to /dev/null or a FIFO writes through it, never replaces it" {
    ln -s /dev/null "$TMP/null"
    "$HPS_BIN/hps-shard" synth 10 -o "$TMP/null" 2>/dev/null
    [ -L "$TMP/null" ]
    [ -c /dev/null ]
    mkfifo "$TMP/fifo"
    cat "$TMP/fifo" > "$TMP/got" &
    "$HPS_BIN/hps-shard" synth 10 -o "$TMP/fifo" 2>/dev/null
    wait
    [ -p "$TMP/fifo" ]
    [ "$(wc -l < "$TMP/got")" -eq 10 ]
    [ -z "$(ls "$TMP" | grep tmp)" ]
}

@test "robust: a write error names the output: a full device, a full stdout" {
    ln -s /dev/full "$TMP/full" # a link: were it renamed over, /dev/full itself survives
    run "$HPS_BIN/hps-shard" synth 1000 -o "$TMP/full"
    [ "$status" -eq 1 ]
    [[ "$output" == *"hps-shard: error: $TMP/full: write failed: No space left on device"* ]]
    [ -L "$TMP/full" ]
    run sh -c "'$HPS_BIN/hps-shard' synth 1000 > /dev/full"
    [ "$status" -eq 1 ]
    [[ "$output" == *"hps-shard: error: <stdout>: write failed: No space left on device"* ]]
}

@test "robust: stats and --metrics on a full disk fail instead of exiting 0" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    run sh -c "'$HPS_BIN/hps-shard' stats '$TMP/shards' > /dev/full"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-shard: error: <stdout>: write failed: No space left on device" ]
    ln -s /dev/full "$TMP/full"
    run "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/shards" --threads 1 -q --metrics "$TMP/full"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-train: error: $TMP/full: write failed: No space left on device" ]
}

@test "robust: past ulimit -f a tool reports EFBIG and leaves no temporary" {
    run sh -c "ulimit -f 8; '$HPS_BIN/hps-shard' synth 100000 -o '$TMP/big.tsv'"
    [ "$status" -eq 1 ]
    [[ "$output" == *"$TMP/big.tsv: write failed: File too large"* ]]
    [ ! -e "$TMP/big.tsv" ]
    [ -z "$(ls "$TMP")" ]
}

@test "robust: a libsvm value beyond a float's range is refused, not trained on as inf" {
    printf '1 3:1e39 7:1\n0 2:1\n' > "$TMP/inf.svm"
    run "$HPS_BIN/hps-shard" --format libsvm -o "$TMP/svm" "$TMP/inf.svm"
    [ "$status" -eq 1 ]
    [[ "$output" == *"inf.svm:1: field 2 (feature): expected idx:value, got '3:1e39'"* ]]
}

@test "robust: a 10-class shard copied into a 5-class directory is refused by hps-train and stats --verify" {
    python3 "$BATS_TEST_DIRNAME/make_multiclass.py" 200 5 1 > "$TMP/mc.svm"
    "$HPS_BIN/hps-shard" -q --format libsvm --classes 5 -o "$TMP/c5" "$TMP/mc.svm"
    "$HPS_BIN/hps-shard" -q --format libsvm --classes 10 -o "$TMP/c10" "$TMP/mc.svm"
    cp "$TMP/c10/shard-00000.hps" "$TMP/c5/"
    run "$HPS_BIN/hps-train" --model "$TESTDATA/models/libsvm-logreg.json" --data "$TMP/c5" --threads 1 -q
    [ "$status" -eq 1 ]
    [ "$output" = "hps-train: error: $TMP/c5/shard-00000.hps: holds 0 dense, 1 slots, 10 classes, weighted; the manifest says 0 dense, 1 slots, 5 classes, weighted" ]
    run "$HPS_BIN/hps-shard" stats --verify "$TMP/c5"
    [ "$status" -eq 1 ]
    [[ "$output" == *"hps-shard: error: $TMP/c5/shard-00000.hps: holds 0 dense, 1 slots, 10 classes"* ]]
}

@test "robust: a JSON input is capped: -m /dev/zero is an error, not an out-of-memory abort" {
    # a limit keeps a regression from eating the machine: on address space, or
    # under ASan (whose shadow memory needs the address space) on one allocation
    limit="ulimit -v 4000000;"
    if ldd "$HPS_BIN/hps-profile" | grep -q libasan; then
        limit=""
        export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=4096"
    fi
    run sh -c "$limit '$HPS_BIN/hps-profile' -m /dev/zero"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-profile: error: /dev/zero: larger than 64 MiB, the most this input may hold" ]
}

@test "robust: a node name with a newline is refused, never written into the rankfile" {
    python3 - "$TESTDATA/clusters/lab.json" "$TMP/evil.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["resources"] = [r for r in c["resources"] if r["kind"] == "cpu"]
c["links"] = []
c["nodes"] = [{"name": "localhost\nrank 9=evil slot=0", "units": {"cpu": 4}}]
json.dump(c, open(sys.argv[2], "w"))
PY
    run "$HPS_BIN/hps-plan" -m "$TESTDATA/models/demo-ctr.json" -c "$TMP/evil.json" \
        -p "$TESTDATA/profiles/demo-ctr.json" --min-throughput 1000 --rankfile "$TMP/ranks" -o "$TMP/plan.json"
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"name 'localhost?rank 9=evil slot=0' must be letters, digits or '._-'" ]]
    [ ! -e "$TMP/ranks" ]
}

@test "robust: a layer type with a newline is echoed on one line" {
    python3 - "$TESTDATA/models/tiny.json" "$TMP/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["layers"][2]["type"] = "fc\nhps-train: error: forged"
json.dump(m, open(sys.argv[2], "w"))
PY
    run "$HPS_BIN/hps-profile" -m "$TMP/m.json"
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"type 'fc?hps-train: error: forged' must be one of "* ]]
}

@test "robust: hps-shard refuses an existing output before reading any input" {
    mkdir "$TMP/out"
    mkfifo "$TMP/in"
    sleep 30 > "$TMP/in" & # an input that never ends: only a check up front returns
    writer=$!
    run timeout 10 "$HPS_BIN/hps-shard" -m "$MODEL" -o "$TMP/out" "$TMP/in"
    kill "$writer"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-shard: error: $TMP/out: already exists (--force replaces it)" ]
}

@test "robust: --force onto a file refuses it and leaves no X.old.* beside it" {
    "$HPS_BIN/hps-shard" synth 100 -o "$TMP/rows.tsv" 2>/dev/null
    echo keep > "$TMP/file"
    run "$HPS_BIN/hps-shard" -q --force -m "$MODEL" -o "$TMP/file" "$TMP/rows.tsv"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-shard: error: $TMP/file: exists and is not a directory: --force replaces only a directory" ]
    [ "$(cat "$TMP/file")" = keep ]
    [ "$(ls "$TMP")" = "$(printf 'file\nrows.tsv')" ]
}

@test "robust: what a SIGKILLed hps-shard left beside its output is removed by the next run" {
    "$HPS_BIN/hps-shard" synth 100 -o "$TMP/rows.tsv" 2>/dev/null
    mkfifo "$TMP/in"
    sleep 30 > "$TMP/in" &
    writer=$!
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/out" "$TMP/in" &
    victim=$!
    for i in $(seq 50); do ls "$TMP" | grep -q '^out\.tmp\.' && break; sleep 0.1; done
    kill -9 "$victim"
    wait "$victim" || true
    kill "$writer"
    ls "$TMP" | grep -q '^out\.tmp\.' # the leftover
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/out" "$TMP/rows.tsv"
    [ -f "$TMP/out/manifest.json" ]
    [ -z "$(ls "$TMP" | grep '^out\.tmp\.')" ]
}

@test "robust: checkpoint temporaries of earlier steps, left by a kill mid-write, are pruned" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    mkdir "$TMP/ckpt"
    echo partial > "$TMP/ckpt/ckpt-000000000001.hpsckpt.tmp.AbC123" # as a SIGKILL mid-write leaves it
    echo ckpt-000000000001.hpsckpt > "$TMP/ckpt/latest.tmp.XyZ789"
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/shards" --threads 1 -q \
        --checkpoint "$TMP/ckpt" --checkpoint-every 5 --resume
    [ -z "$(ls "$TMP/ckpt" | grep '\.tmp\.')" ]
    ls "$TMP/ckpt" | grep -q '\.hpsckpt$'
}

@test "robust: a flipped byte anywhere in a manifest, hot-key statistics included, is caught" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    "$HPS_BIN/hps-shard" stats "$TMP/shards" > /dev/null
    cp "$TMP/shards/manifest.json" "$TMP/good.json"
    # one bit of each of 40 bytes spread over the hot-key statistics, one at
    # a time: the 40 manifests written by one python, not one each
    mkdir "$TMP/flips"
    python3 - "$TMP/good.json" "$TMP/flips" <<'PY'
import sys
t = open(sys.argv[1], "rb").read()
a = t.index(b'"hot_keys"')
b = t.find(b'"sha256"') if b'"sha256"' in t else len(t) - 2
step = (b - a) // 40
for i in range(40):
    f = bytearray(t)
    f[a + 1 + i * step] ^= 0x01
    open(f"{sys.argv[2]}/{i}", "wb").write(f)
PY
    caught=0
    for i in $(seq 0 39); do
        cp "$TMP/flips/$i" "$TMP/shards/manifest.json"
        run "$HPS_BIN/hps-shard" stats "$TMP/shards"
        [ "$status" -ne 0 ] && caught=$((caught + 1))
    done
    echo "# $caught of 40 flips caught" >&3
    [ "$caught" -eq 40 ]
    [[ "$output" == "hps-shard: error: $TMP/shards/manifest.json:"* ]]
}

@test "robust: --export writes FILE.sha256 beside it; sha256sum -c catches a corrupted copy" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/shards" --threads 1 -q --export "$TMP/m.safetensors"
    [ "$(cut -d' ' -f3 "$TMP/m.safetensors.sha256")" = m.safetensors ]
    (cd "$TMP" && sha256sum -c m.safetensors.sha256)
    python3 - "$TMP/m.safetensors" <<'PY'
import sys
t = bytearray(open(sys.argv[1], "rb").read())
t[len(t) // 2] ^= 0x04
open(sys.argv[1], "wb").write(t)
PY
    run sh -c "cd '$TMP' && sha256sum -c m.safetensors.sha256"
    [ "$status" -ne 0 ]
    [[ "$output" == *"m.safetensors: FAILED"* ]]
}

@test "robust: one version string: every man page carries the version the tools report" {
    version=$("$HPS_BIN/hps-train" --version | sed -n '1s/^hps-train (hps) //p')
    grep -q "^VERSION *:= *$version\$" "$ROOT/Makefile"
    for page in "$ROOT"/man/*.[157]; do
        grep -q "^\.TH .* \"hps $version\" " "$page" || { echo "$page: not hps $version"; false; }
    done
}

# A checkpoint of 2 steps of the demo model, its table capped and evicting.
demo_ckpt() {
    DEMO=$TESTDATA/models/demo-ctr.json
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$DEMO" -o "$TMP/shards" "$TMP/rows.tsv"
    "$HPS_BIN/hps-train" -q -m "$DEMO" --data "$TMP/shards" --steps 2 --max-table-mb 4 --evict \
        --checkpoint "$TMP/ck"
    CKPT=$TMP/ck/ckpt-000000000002.hpsckpt
    cp "$CKPT" "$TMP/good.hpsckpt"
}

@test "robust: a checkpoint with valid digests is refused unless every row is well-formed" {
    demo_ckpt
    for forged in key-twice slot=16777216 slot=-1 nan-row nan-dense; do
        cp "$TMP/good.hpsckpt" "$CKPT"
        python3 "$ROOT/tests/cli/forge.py" ckpt "$CKPT" "$forged"
        run "$HPS_BIN/hps-train" -m "$DEMO" --data "$TMP/shards" --epochs 4 --max-table-mb 4 --evict \
            --checkpoint "$TMP/ck" --resume --export "$TMP/m.safetensors"
        echo "$forged: $output"
        # one line, naming the file and what is wrong; nothing trained or exported
        [ "$status" -eq 1 ]
        [ "${#lines[@]}" -eq 1 ]
        [ ! -e "$TMP/m.safetensors" ]
        case $forged in
        key-twice) [[ "$output" == "hps-train: error: $CKPT: embedding layer 0: rows 0 and 1 have the same slot "*" and key "* ]] ;;
        slot=*) [[ "$output" == "hps-train: error: $CKPT: embedding layer 0: row 0 (slot ${forged#slot=}, key "*") has a slot the layer does not have" ]] ;;
        nan-row) [[ "$output" == "hps-train: error: $CKPT: embedding layer 0: row 0 (slot "*") has a weight that is not finite" ]] ;;
        nan-dense) [ "$output" = "hps-train: error: $CKPT: dense parameter 0 is nan: expected a finite number" ] ;;
        esac
    done
    # the forger itself: the unforged file, recompressed and re-digested, resumes
    cp "$TMP/good.hpsckpt" "$CKPT"
    python3 "$ROOT/tests/cli/forge.py" ckpt "$CKPT" slot=0
    run "$HPS_BIN/hps-train" -q -m "$DEMO" --data "$TMP/shards" --epochs 4 --max-table-mb 4 --evict \
        --checkpoint "$TMP/ck" --resume
    [ "$status" -eq 0 ]
}

@test "robust: a shard with valid checksums but a NaN or inf dense value is refused, naming the file and row" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    for value in nan inf; do
        rm -rf "$TMP/shards" "$TMP/m.safetensors"
        "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
        row=$(python3 "$ROOT/tests/cli/forge.py" shard "$TMP/shards" "$value")
        run "$HPS_BIN/hps-train" -m "$MODEL" --data "$TMP/shards" --epochs 1 --export "$TMP/m.safetensors"
        [ "$status" -eq 1 ]
        [ "$output" = "hps-train: error: $TMP/shards/shard-00000.hps: row $row (block 0, row $row): dense feature 1 is $value: expected a finite number" ]
        [ ! -e "$TMP/m.safetensors" ]
        # and --verify, which reads every block
        run "$HPS_BIN/hps-shard" stats --verify "$TMP/shards"
        [ "$status" -eq 1 ]
        [[ "$output" == *"row $row (block 0, row $row): dense feature 1 is $value"* ]]
    done
}

# Outputs checked up front (hps-train(1), EXIT STATUS): --data names nothing,
# so an error about the output shows that it came before any work.
@test "robust: hps-train checks every output path before any work" {
    echo file > "$TMP/file"
    opts=("--export $TMP/nodir/m.safetensors" "--export $TMP" "--checkpoint $TMP/file"
          "--checkpoint $TMP/nodir/ckpt" "--metrics $TMP/nodir/m.ndjson" "--log-dir $TMP/file/logs"
          "--probe 1 -o $TMP/nodir/p.json")
    want=("--export: $TMP/nodir/m.safetensors: no directory '$TMP/nodir'"
          "--export: $TMP: is a directory"
          "--checkpoint: $TMP/file: exists and is not a directory"
          "--checkpoint: $TMP/nodir/ckpt: no directory '$TMP/nodir'"
          "--metrics: $TMP/nodir/m.ndjson: no directory '$TMP/nodir'"
          "--log-dir: $TMP/file/logs: '$TMP/file' is not a directory"
          "--output: $TMP/nodir/p.json: no directory '$TMP/nodir'")
    for i in "${!opts[@]}"; do
        run "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/no-shards" -q ${opts[$i]}
        echo "${opts[$i]}: $output"
        [ "$status" -eq 1 ]
        [ "$output" = "hps-train: error: ${want[$i]}" ]
    done
    [ "$(ls "$TMP")" = file ]
}

# Crash points (HPS_CRASH_AT, the test build's): the export and its .sha256
# are replaced so that no crash leaves a pair that disagrees, and the next run
# removes the temporaries a crash left.
@test "robust: a kill at any step of --export leaves no export beside another's digest; a rerun cleans up" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    train=("--model" "$MODEL" --data "$TMP/shards" --threads 1 -q --steps 3)
    for at in before-rename:m.safetensors after-rename:m.safetensors before-rename:m.safetensors.sha256; do
        "$HPS_BIN/hps-train" "${train[@]}" --export "$TMP/m.safetensors"
        (cd "$TMP" && sha256sum -c --quiet m.safetensors.sha256)
        cp "$TMP/m.safetensors" "$TMP/old"
        run env HPS_CRASH_AT=$at "$HPS_TEST_BIN/hps-train" "${train[@]}" --seed 9 --export "$TMP/m.safetensors"
        echo "$at: $status"
        [ "$status" -eq 137 ]
        ls "$TMP" | grep -q '^m\.safetensors.*\.tmp\.' # what the kill left
        # the old pair, or an export without a digest: never a good file called FAILED
        if [ -e "$TMP/m.safetensors.sha256" ]; then (cd "$TMP" && sha256sum -c --quiet m.safetensors.sha256); fi
        [ "$at" != before-rename:m.safetensors ] || cmp -s "$TMP/m.safetensors" "$TMP/old"
        rm "$TMP/old"
        "$HPS_BIN/hps-train" "${train[@]}" --export "$TMP/m.safetensors"
        (cd "$TMP" && sha256sum -c --quiet m.safetensors.sha256)
        [ -z "$(ls "$TMP" | grep '\.tmp\.')" ]
    done
}

@test "robust: temporaries of an export a kill interrupted are removed by the next export" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    echo partial > "$TMP/m.safetensors.tmp.AbC123"
    echo partial > "$TMP/m.safetensors.sha256.tmp.XyZ789"
    echo other > "$TMP/other.safetensors.tmp.AbC123" # not ours: stays
    "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/shards" --threads 1 -q --steps 3 --export "$TMP/m.safetensors"
    [ "$(ls "$TMP" | grep '\.tmp\.')" = other.safetensors.tmp.AbC123 ]
}

@test "robust: a checkpoint temporary of the last step, left by a kill, is removed by the resumed run" {
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    train=(--model "$MODEL" --data "$TMP/shards" --threads 1 -q --checkpoint "$TMP/ckpt" --checkpoint-every 3 --steps 6)
    run env HPS_CRASH_AT=before-rename:ckpt-000000000006.hpsckpt "$HPS_TEST_BIN/hps-train" "${train[@]}"
    [ "$status" -eq 137 ]
    ls "$TMP/ckpt" | grep -q '^ckpt-000000000006\.hpsckpt\.tmp\.'
    [ "$(cat "$TMP/ckpt/latest")" = ckpt-000000000003.hpsckpt ]
    "$HPS_BIN/hps-train" "${train[@]}" --resume
    [ "$(cat "$TMP/ckpt/latest")" = ckpt-000000000006.hpsckpt ]
    [ -z "$(ls "$TMP/ckpt" | grep '\.tmp\.')" ]
}

@test "robust: a kill during hps-shard --force's swap leaves one shard set; the next run tidies up" {
    "$HPS_BIN/hps-shard" synth 500 -o "$TMP/a.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" synth 700 --seed 2 -o "$TMP/b.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/out" "$TMP/a.tsv"
    cp "$TMP/out/manifest.json" "$TMP/old.json"
    # between moving the old set aside and renaming the new one in: the
    # next run puts the old set back (then refuses it without --force)
    run env HPS_CRASH_AT=moved-aside:out "$HPS_TEST_BIN/hps-shard" -q --force -m "$MODEL" -o "$TMP/out" "$TMP/b.tsv"
    [ "$status" -eq 137 ]
    [ ! -e "$TMP/out" ]
    ls "$TMP" | grep -q '^out\.old\.'
    run "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/out" "$TMP/b.tsv"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-shard: error: $TMP/out: already exists (--force replaces it)" ]
    cmp "$TMP/out/manifest.json" "$TMP/old.json"
    [ -z "$(ls "$TMP" | grep '^out\.')" ]
    # after the new set is in place, before the old one is removed
    run env HPS_CRASH_AT=after-rename:out "$HPS_TEST_BIN/hps-shard" -q --force -m "$MODEL" -o "$TMP/out" "$TMP/b.tsv"
    [ "$status" -eq 137 ]
    ls "$TMP" | grep -q '^out\.old\.'
    "$HPS_BIN/hps-shard" stats "$TMP/out" >/dev/null
    ! cmp -s "$TMP/out/manifest.json" "$TMP/old.json"
    "$HPS_BIN/hps-shard" -q --force -m "$MODEL" -o "$TMP/out" "$TMP/a.tsv"
    [ -z "$(ls "$TMP" | grep '^out\.')" ]
}

@test "robust: an old set a killed --force left aside is put back or removed by the next run" {
    "$HPS_BIN/hps-shard" synth 500 -o "$TMP/a.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/set" "$TMP/a.tsv"
    # as a SIGKILL between the two renames leaves it, by a process now gone
    sh -c 'exit 0' & gone=$!
    wait "$gone"
    mv "$TMP/set" "$TMP/out.old.$gone.AbC123"
    run "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/out" "$TMP/a.tsv"
    [ "$status" -eq 1 ]
    [ -f "$TMP/out/manifest.json" ]
    [ -z "$(ls "$TMP" | grep '^out\.')" ]
}

# ulimit -v in a subshell, under timeout: a regression fails instead of hanging.
# ASan reserves terabytes of address space for its shadow: no ulimit -v holds it.
skip_under_asan() {
    if ldd "$HPS_BIN/hps-shard" | grep -q libasan; then
        skip "ulimit -v cannot hold AddressSanitizer's shadow memory (make asan)"
    fi
}

@test "robust: under ulimit -v a tool starts or says why in one line; it never spins in OpenBLAS's start" {
    skip_under_asan
    run timeout 30 sh -c "ulimit -v 150000; '$HPS_BIN/hps-shard' -V"
    echo "150 MB: $status: $output"
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == "hps-shard: error: the address-space limit (ulimit -v 150000) leaves less than the "*" MiB that OpenBLAS (1 thread) and the tool need to start" ]]
    run timeout 30 sh -c "ulimit -v 300000; '$HPS_BIN/hps-shard' -V"
    echo "300 MB: $status"
    [ "$status" -eq 0 ]
    [[ "$output" == "hps-shard (hps) "* ]]
}

@test "robust: out of memory on the data path is one error line and exit 1, not an abort" {
    skip_under_asan
    "$HPS_BIN/hps-shard" synth 2000 -o "$TMP/rows.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/rows.tsv"
    sed 's/"batch": 256/"batch": 1048576/' "$MODEL" > "$TMP/big.json" # GiBs of activations
    run timeout 60 sh -c "ulimit -v 1500000; '$HPS_BIN/hps-train' --model '$TMP/big.json' --data '$TMP/shards' --threads 1 -q"
    echo "$status: $output"
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == "hps-train: error: out of memory: "* ]]
}

@test "robust: what users run has no crash points (HPS_CRASH_AT)" {
    "$HPS_BIN/hps-shard" synth 500 -o "$TMP/a.tsv" 2>/dev/null
    HPS_CRASH_AT=before-rename:shards "$HPS_BIN/hps-shard" -q -m "$MODEL" -o "$TMP/shards" "$TMP/a.tsv"
    HPS_CRASH_AT=moved-aside:shards "$HPS_BIN/hps-shard" -q --force -m "$MODEL" -o "$TMP/shards" "$TMP/a.tsv"
    HPS_CRASH_AT=before-rename:m.safetensors "$HPS_BIN/hps-train" --model "$MODEL" --data "$TMP/shards" \
        --threads 1 -q --steps 1 --export "$TMP/m.safetensors"
    (cd "$TMP" && sha256sum -c --quiet m.safetensors.sha256)
}

@test "robust: hps-plan and hps-profile check -o (and --rankfile) before any work" {
    run "$HPS_BIN/hps-plan" -c "$TESTDATA/clusters/lab.json" -p "$TESTDATA/profiles/demo-ctr-cpu.json" \
        --min-throughput 1000 -o "$TMP/nodir/plan.json"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-plan: error: --output: $TMP/nodir/plan.json: no directory '$TMP/nodir'" ]
    run "$HPS_BIN/hps-plan" -c "$TESTDATA/clusters/lab.json" -p "$TESTDATA/profiles/demo-ctr-cpu.json" \
        --min-throughput 1000 --rankfile "$TMP"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-plan: error: --rankfile: $TMP: is a directory" ]
    run "$HPS_BIN/hps-profile" -m "$MODEL" -o "$TMP/nodir/p.json"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-profile: error: --output: $TMP/nodir/p.json: no directory '$TMP/nodir'" ]
    [ -z "$(ls "$TMP")" ]
}
