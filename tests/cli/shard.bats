#!/usr/bin/env bats
# hps-shard from the command line: round trips, exact splits, determinism,
# corruption, malformed inputs, cleanup.

load helpers
HPS_BIN=${HPS_BIN:-$BATS_TEST_DIRNAME/../../bin}
ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
DATA=$ROOT/testdata/data
SHARD=$HPS_BIN/hps-shard

setup() {
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
}

# rows of every shard in the manifest, space-separated
shard_rows() {
    python3 -c 'import json,sys; print(" ".join(str(s["rows"]) for s in json.load(open(sys.argv[1]))["shards"]))' "$1/manifest.json"
}

# The input as hps-shard parses it with --hash none --transform none:
# empty integer features become 0.
criteo_parsed() {
    awk -F'\t' -v OFS='\t' '{for (i = 2; i <= 14; i++) if ($i == "") $i = 0; print}' "$1"
}

@test "shard: --help and --version" {
    run "$SHARD" --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"usage: hps-shard [OPTIONS] -o DIR INPUT..."* ]]
    run "$SHARD" --version
    [ "$status" -eq 0 ]
    [[ "$output" == "hps-shard (hps) "* ]]
}

@test "shard: every option in --help is in the completions and the man page" {
    missing=""
    for o in $("$SHARD" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
        grep -q -- "$o" "$ROOT/completions/bash/hps-shard" || missing="$missing bash:$o"
        grep -q -- "$o" "$ROOT/completions/zsh/_hps-shard" || missing="$missing zsh:$o"
        grep -qF -- "\\-\\-${o#--}" "$ROOT/man/hps-shard.1" || missing="$missing man:$o"
    done
    [ -z "$missing" ] || { echo "undocumented:$missing"; false; }
    grep -q '^\.SH EXIT STATUS' "$ROOT/man/hps-shard.1"
}

@test "shard: usage errors exit 2" {
    run "$SHARD" "$DATA/criteo-small.tsv"
    [ "$status" -eq 2 ]
    [[ "$output" == *"-o DIR is required"* ]]
    run "$SHARD" -o "$TMP/o" -n 2 -w 1,2 "$DATA/criteo-small.tsv"
    [ "$status" -eq 2 ]
    run "$SHARD" -o "$TMP/o" --weights 1,x "$DATA/criteo-small.tsv"
    [ "$status" -eq 2 ]
    [[ "$output" == *"--weights: expected non-negative numbers"* ]]
    [ ! -e "$TMP/o" ]
}

@test "shard: criteo round trip: text to shards to cat equals the parsed input" {
    "$SHARD" -q -o "$TMP/d" --hash none --transform none -w 3,1 --holdout 0.1 --block-rows 7 "$DATA/criteo-small.tsv"
    "$SHARD" cat "$TMP/d" > "$TMP/back.tsv"
    criteo_parsed "$DATA/criteo-small.tsv" > "$TMP/expect.tsv"
    cmp "$TMP/back.tsv" "$TMP/expect.tsv"
    # shuffled, the same rows in another order
    "$SHARD" -q -o "$TMP/s" --hash none --transform none --shuffle --seed 9 "$DATA/criteo-small.tsv"
    "$SHARD" cat "$TMP/s" > "$TMP/shuf.tsv"
    ! cmp -s "$TMP/shuf.tsv" "$TMP/expect.tsv"
    cmp <(sort "$TMP/shuf.tsv") <(sort "$TMP/expect.tsv")
}

@test "shard: hashed keys and the log transform match the golden output" {
    "$SHARD" -q -o "$TMP/d" --hash-seed 5 "$DATA/criteo-small.tsv"
    "$SHARD" cat "$TMP/d" | head -5 > "$TMP/out"
    golden_check "$BATS_TEST_DIRNAME/golden/shard/criteo-small-head.cat" "$TMP/out"
}

@test "shard: zstd input and stdin give the same shards as the file" {
    "$SHARD" -q -o "$TMP/a" -n 2 "$DATA/criteo-small.tsv"
    zstd -q -c "$DATA/criteo-small.tsv" > "$TMP/in.tsv.zst"
    "$SHARD" -q -o "$TMP/b" -n 2 "$TMP/in.tsv.zst"
    "$SHARD" -q -o "$TMP/c" -n 2 - < "$DATA/criteo-small.tsv"
    for f in shard-00000.hps shard-00001.hps; do
        cmp "$TMP/a/$f" "$TMP/b/$f"
        cmp "$TMP/a/$f" "$TMP/c/$f"
    done
    [ "$(ls "$TMP/c")" = "$(printf 'manifest.json\nshard-00000.hps\nshard-00001.hps')" ]
}

@test "shard: weights, shards, plan shares and holdout give exact row counts" {
    "$SHARD" synth 1000 --seed 3 -o "$TMP/in.tsv" 2>/dev/null
    "$SHARD" -q -o "$TMP/w" -w 3,1,1 "$TMP/in.tsv"
    [ "$(shard_rows "$TMP/w")" = "600 200 200" ]
    "$SHARD" -q -o "$TMP/n" -n 3 "$TMP/in.tsv"
    [ "$(shard_rows "$TMP/n")" = "334 333 333" ]
    "$SHARD" -q -o "$TMP/p" --plan "$ROOT/testdata/plans/plan-3workers.json" --holdout 0.1 "$TMP/in.tsv"
    [ "$(shard_rows "$TMP/p")" = "450 270 180 100" ]
    [ -f "$TMP/p/holdout.hps" ]
    # the plan's server count gives the key lists
    [ -f "$TMP/p/keys/server-00000.keys" ] && [ -f "$TMP/p/keys/server-00001.keys" ]
    "$SHARD" -q -o "$TMP/z" -w 1,0,2 "$TMP/in.tsv"
    [ "$(shard_rows "$TMP/z")" = "333 0 667" ]
    [ "$("$SHARD" cat "$TMP/z" | wc -l)" -eq 1000 ]
}

@test "shard: server key lists hold every distinct training key once" {
    "$SHARD" -q -o "$TMP/d" --hash none --servers 3 --holdout 0.2 "$DATA/criteo-small.tsv"
    # distinct (slot, key) pairs of the training shards, from cat
    want=$(for f in "$TMP"/d/shard-*.hps; do "$SHARD" cat "$f"; done |
        awk -F'\t' '{for (i = 15; i <= 40; i++) if ($i != "") print i, $i}' | sort -u | wc -l)
    got=$(python3 -c 'import json,sys; print(sum(f["keys"] for f in json.load(open(sys.argv[1]))["servers"]["files"]))' "$TMP/d/manifest.json")
    [ "$want" -eq "$got" ]
    python3 - "$TMP/d/keys" <<'PY'
import struct, sys, os
for p in range(3):
    b = open(os.path.join(sys.argv[1], "server-%05d.keys" % p), "rb").read()
    assert b[:8] == b"HPSKEYS\0"
    ver, server, servers, slots = struct.unpack_from("<4I", b, 8)
    assert (ver, server, servers, slots) == (1, p, 3, 26)
    (n,) = struct.unpack_from("<Q", b, 24)
    assert len(b) == 32 + 8 * 26 + 8 * n + 4
PY
}

@test "shard: the same seed gives the same bytes, whatever the threads" {
    "$SHARD" synth 3000 --seed 11 -T 1 -o "$TMP/a.tsv" 2>/dev/null
    "$SHARD" synth 3000 --seed 11 -T 2 -o "$TMP/b.tsv" 2>/dev/null
    cmp "$TMP/a.tsv" "$TMP/b.tsv"
    "$SHARD" -q -o "$TMP/x" -n 2 --shuffle --seed 4 --shuffle-mem 1 --block-rows 100 -T 1 "$TMP/a.tsv"
    "$SHARD" -q -o "$TMP/y" -n 2 --shuffle --seed 4 --shuffle-mem 1 --block-rows 100 -T 3 "$TMP/a.tsv"
    for f in manifest.json shard-00000.hps shard-00001.hps; do cmp "$TMP/x/$f" "$TMP/y/$f"; done
    "$SHARD" -q -o "$TMP/z" -n 2 --shuffle --seed 5 --shuffle-mem 1 --block-rows 100 "$TMP/a.tsv"
    ! cmp -s "$TMP/x/shard-00000.hps" "$TMP/z/shard-00000.hps"
}

@test "shard: synth reports the planted model's AUC" {
    run "$SHARD" synth 20000 --seed 2 -o "$TMP/s.tsv" --meta "$TMP/meta.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *"planted model AUC 0."* ]]
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["rows"] == 20000 and 0.7 < m["planted_auc"] < 0.9, m' "$TMP/meta.json"
    [ "$(wc -l < "$TMP/s.tsv")" -eq 20000 ]
    [ "$(awk -F'\t' 'NF != 40' "$TMP/s.tsv" | wc -l)" -eq 0 ]
}

@test "shard: synth --cardinality kaggle draws a long tail: many more distinct ids in the large slots" {
    "$SHARD" synth 50000 --seed 3 -o "$TMP/z.tsv" 2> /dev/null
    "$SHARD" synth 50000 --seed 3 --cardinality kaggle -o "$TMP/k.tsv" 2> /dev/null
    # C3 (column 17, 10M values in the Kaggle set) and C9 (column 23, 3 values)
    distinct() { cut -f "$2" "$1" | grep -v '^$' | sort -u | wc -l; }
    z=$(distinct "$TMP/z.tsv" 17) k=$(distinct "$TMP/k.tsv" 17)
    echo "C3: zipf $z, kaggle $k"
    [ "$k" -gt $((z * 3 / 2)) ]
    [ "$(distinct "$TMP/k.tsv" 23)" -eq 3 ]
    run "$SHARD" synth 10 --cardinality criteo
    [ "$status" -eq 2 ]
    [[ "$output" == *"--cardinality: 'criteo' is not one of zipf, kaggle"* ]]
}

@test "shard: synth --interactions plants pair effects: the same features, labels a linear model cannot explain alone" {
    "$SHARD" synth 30000 --seed 4 -o "$TMP/a.tsv" --meta "$TMP/a.json" 2> /dev/null
    "$SHARD" synth 30000 --seed 4 --interactions 8 -o "$TMP/b.tsv" --meta "$TMP/b.json" 2> /dev/null
    # the features are drawn alike; only labels move
    cmp <(cut -f 2- "$TMP/a.tsv") <(cut -f 2- "$TMP/b.tsv")
    ! cmp -s <(cut -f 1 "$TMP/a.tsv") <(cut -f 1 "$TMP/b.tsv")
    python3 - "$TMP/a.json" "$TMP/b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["interactions"] == 0 and b["interactions"] == 8, (a, b)
# the planted model explains more of the labels with its pair effects
assert b["planted_auc"] > a["planted_auc"] + 0.01, (a["planted_auc"], b["planted_auc"])
PY
    run "$SHARD" synth 10 --interactions 9
    [ "$status" -eq 2 ]
}

@test "shard: version 1 shards (hps 0.1.0) still read, verify and cat as the same text shards again" {
    old=$ROOT/testdata/shards-v1
    "$SHARD" stats --verify "$old/libsvm-dense" > /dev/null
    "$SHARD" stats --verify "$old/criteo-small" > /dev/null
    "$SHARD" -q -o "$TMP/svm" --format libsvm --classes 3 --dense 5 --transform none --block-rows 4 "$DATA/libsvm-dense.svm"
    "$SHARD" -q -o "$TMP/tsv" --block-rows 7 "$DATA/criteo-small.tsv"
    [ "$(od -An -tu4 -j8 -N4 "$TMP/svm/shard-00000.hps" | tr -d ' ')" = 2 ]
    [ "$(od -An -tu4 -j8 -N4 "$old/libsvm-dense/shard-00000.hps" | tr -d ' ')" = 1 ]
    diff <("$SHARD" cat "$old/libsvm-dense") <("$SHARD" cat "$TMP/svm")
    diff <("$SHARD" cat "$old/criteo-small") <("$SHARD" cat "$TMP/tsv")
    "$SHARD" cat "$old/libsvm-dense" | grep -qx '2 1:1.4013e-45 2:-1.5 4:65504 5:-0.125'
}

@test "shard: a flipped byte is caught, naming shard and block" {
    "$SHARD" -q -o "$TMP/d" --block-rows 10 "$DATA/criteo-small.tsv"
    "$SHARD" stats --verify "$TMP/d" > /dev/null
    f="$TMP/d/shard-00000.hps"
    size=$(stat -c %s "$f")
    python3 -c 'import sys; p, o = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, "rb").read()); b[o] ^= 1; open(p, "wb").write(b)' "$f" $((size / 2))
    run "$SHARD" cat "$TMP/d"
    [ "$status" -eq 1 ]
    [[ "$output" == *"shard-00000.hps: block "*": checksum mismatch"* ]]
    run "$SHARD" stats --verify "$TMP/d"
    [ "$status" -eq 1 ]
    [[ "$output" == *"checksum mismatch"* ]]
}

@test "shard: malformed criteo lines name file, line and field; nothing is left behind" {
    cd "$TMP"
    run "$SHARD" -o out "$DATA/criteo-bad-hex.tsv"
    [ "$status" -eq 1 ]
    [ "$output" = "hps-shard: error: $DATA/criteo-bad-hex.tsv:10: field 16 (C2): expected 1 to 16 hex digits, got 'xyz'" ]
    run "$SHARD" -o out "$DATA/criteo-bad-fields.tsv"
    [ "$status" -eq 1 ]
    [[ "$output" == *"criteo-bad-fields.tsv:5: expected 40 tab-separated fields, got 3" ]]
    run "$SHARD" -o out "$DATA/criteo-bad-label.tsv"
    [[ "$output" == *"criteo-bad-label.tsv:3: field 1 (label): expected 0 or 1, got '2'" ]]
    run "$SHARD" -o out --shuffle "$DATA/criteo-bad-int.tsv"
    [[ "$output" == *"criteo-bad-int.tsv:7: field 4 (I3): expected an integer, got '1.5'" ]]
    [ -z "$(ls -A "$TMP")" ]
    run "$SHARD" -o out --skip-bad "$DATA/criteo-bad-hex.tsv"
    [ "$status" -eq 0 ]
    [[ "$output" == *"skipped 1 malformed line"* ]]
    [ "$(shard_rows out)" = "9" ]
}

@test "shard: libsvm binary, multi-class and dense; malformed libsvm" {
    "$SHARD" -q --format libsvm -o "$TMP/b" "$DATA/libsvm-binary.svm"
    "$SHARD" cat "$TMP/b" > "$TMP/b.svm"
    sed -e 's/^+1/1/' -e 's/^-1/0/' "$DATA/libsvm-binary.svm" | cmp - "$TMP/b.svm"
    "$SHARD" -q --format libsvm --classes 5 -n 2 -o "$TMP/m" "$DATA/libsvm-multiclass.svm"
    "$SHARD" cat "$TMP/m" | cmp - "$DATA/libsvm-multiclass.svm"
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["schema"]["label"] == {"kind": "multiclass", "classes": 5} and m["schema"]["slots"][0]["weighted"]' "$TMP/m/manifest.json"
    "$SHARD" -q --format libsvm --classes 5 -m "$ROOT/testdata/models/libsvm-multiclass.json" -o "$TMP/mm" "$DATA/libsvm-multiclass.svm"
    "$SHARD" -q --format libsvm --dense 19 -o "$TMP/d" "$DATA/libsvm-binary.svm"
    "$SHARD" cat --as libsvm "$TMP/d" | head -1 | grep -q '^0 5:0.25 6:0.25 13:1 15:4$'
    run "$SHARD" --format libsvm -o "$TMP/x" "$DATA/libsvm-bad.svm"
    [ "$status" -eq 1 ]
    [[ "$output" == *"libsvm-bad.svm:3: field 2 (feature): expected idx:value, got '4:x'" ]]
    run "$SHARD" --format libsvm --classes 3 -o "$TMP/x" "$DATA/libsvm-multiclass.svm"
    [ "$status" -eq 1 ]
    [[ "$output" == *"field 1 (label): expected a class in [0, 3)"* ]]
    [ ! -e "$TMP/x" ]
}

@test "shard: a model that does not fit the data is a usage error" {
    run "$SHARD" -o "$TMP/x" -m "$ROOT/testdata/models/tiny.json" "$DATA/criteo-small.tsv"
    [ "$status" -eq 2 ]
    [[ "$output" == *"tiny.json: input has 3 dense features and 2 slots, criteo data gives 13 and 26"* ]]
    "$SHARD" -q -o "$TMP/ok" -m "$ROOT/testdata/models/demo-ctr.json" "$DATA/criteo-small.tsv"
    grep -q '"digest": "sha256:' "$TMP/ok/manifest.json"
}

@test "shard: criteo data feeds a dense-only model: its 13 counts, the categorical fields dropped" {
    cat > "$TMP/dense.json" <<'EOF'
{"name": "criteo-dense", "batch": 16,
 "input": {"dense": 13, "slots": [], "label": {"kind": "binary"}},
 "layers": [{"name": "fc1", "type": "fc", "out": 8, "activation": "relu"},
            {"name": "out", "type": "fc", "out": 1},
            {"name": "loss", "type": "loss", "loss": "logloss"}]}
EOF
    "$SHARD" -q --transform none -m "$TMP/dense.json" -o "$TMP/d" "$DATA/criteo-small.tsv"
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["schema"]; assert s["dense"] == 13 and s["slots"] == [], s' "$TMP/d/manifest.json"
    "$SHARD" cat "$TMP/d" > "$TMP/d.tsv"
    criteo_parsed "$DATA/criteo-small.tsv" | cut -f1-14 | cmp - "$TMP/d.tsv"
    # a malformed categorical field is still an error naming it
    printf '0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\tzz%s\n' "$(printf '\t%.0s' $(seq 25))" > "$TMP/bad.tsv"
    run "$SHARD" -m "$TMP/dense.json" -o "$TMP/x" "$TMP/bad.tsv"
    [ "$status" -eq 1 ]
    [[ "$output" == *"bad.tsv:1: field 15 (C1): expected 1 to 16 hex digits, got 'zz'"* ]]
}

@test "shard: raw libsvm dense values that look unscaled get a warning naming the feature, its figure and --transform" {
    printf '0 1:0.5 2:3\n1 1:0.25 2:1500\n0 1:-0.75 2:12\n' > "$TMP/raw.svm"
    run "$SHARD" --format libsvm --dense 2 -o "$TMP/a" "$TMP/raw.svm"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: dense feature 2 reaches 1500 and the values are kept raw (--transform none, the libsvm default): give --transform log, or scale the data"* ]]
    # said: --transform none; scaled: nothing to say
    run "$SHARD" --format libsvm --dense 2 --transform none -o "$TMP/b" "$TMP/raw.svm"
    [[ "$output" != *warning* ]]
    run "$SHARD" --format libsvm --dense 2 --transform log -o "$TMP/c" "$TMP/raw.svm"
    [[ "$output" != *warning* ]]
    printf '0 1:0.5 2:3\n1 1:0.25 2:-99\n' > "$TMP/scaled.svm"
    run "$SHARD" --format libsvm --dense 2 -o "$TMP/d" "$TMP/scaled.svm"
    [ "$status" -eq 0 ]
    [[ "$output" != *warning* ]]
}

@test "shard: an existing output needs --force; an interrupted run leaves nothing" {
    "$SHARD" -q -o "$TMP/d" "$DATA/criteo-small.tsv"
    run "$SHARD" -q -o "$TMP/d" -n 2 "$DATA/criteo-small.tsv"
    [ "$status" -eq 1 ]
    [[ "$output" == *"already exists (--force replaces it)"* ]]
    "$SHARD" -q -o "$TMP/d" -n 2 --force "$DATA/criteo-small.tsv"
    [ "$(shard_rows "$TMP/d")" = "30 30" ]
    # stdin that never ends: the run sits spooling it when the signal comes
    mkfifo "$TMP/fifo"
    (cat "$DATA/criteo-small.tsv"; sleep 3) > "$TMP/fifo" &
    feeder=$!
    "$SHARD" -q -o "$TMP/int" - < "$TMP/fifo" &
    pid=$!
    sleep 0.5
    ls -d "$TMP"/int.tmp.* > /dev/null
    kill -TERM $pid
    wait $pid || true
    kill $feeder 2> /dev/null || true
    [ ! -e "$TMP/int" ]
    [ -z "$(ls -d "$TMP"/int.tmp.* 2> /dev/null)" ]
}

@test "shard: stats summarises a directory" {
    "$SHARD" -q -o "$TMP/d" -n 2 --holdout 0.2 "$DATA/criteo-small.tsv"
    run "$SHARD" stats "$TMP/d"
    [ "$status" -eq 0 ]
    [[ "$output" == *"60 rows, criteo input, 13 dense, 26 slots, binary label"* ]]
    [[ "$output" == *"holdout.hps        holdout"* ]]
    [[ "$output" == *"C26"* ]]
}

# stats --verify read every shard but never the key lists: 60 of 60 byte
# flips in keys/server-*.keys went unnoticed.
@test "shard: stats --verify checks the server key lists: any flipped byte, a forged list with its own CRC" {
    "$SHARD" -q -o "$TMP/d" --servers 2 "$DATA/criteo-small.tsv"
    "$SHARD" stats --verify "$TMP/d" > /dev/null
    keys=$TMP/d/keys/server-00001.keys
    cp "$keys" "$TMP/good.keys"
    # the 60 flipped lists written by one python, not one each (make check's budget)
    mkdir "$TMP/flips"
    python3 -c 'import sys; g = open(sys.argv[1], "rb").read(); n = len(g)
for i in range(60):
    b = bytearray(g); b[i * (n - 1) // 59] ^= 0x10; open(f"{sys.argv[2]}/{i}", "wb").write(b)' \
        "$TMP/good.keys" "$TMP/flips"
    caught=0
    for i in $(seq 0 59); do
        cp "$TMP/flips/$i" "$keys"
        run "$SHARD" stats --verify "$TMP/d"
        [ "$status" -eq 1 ] && [[ "${lines[0]}" == "hps-shard: error: $keys: "* ]] && caught=$((caught + 1))
    done
    echo "# $caught of 60 flips caught" >&3
    [ "$caught" -eq 60 ]
    # a key of the other server, with the file's CRC made good again: the structure is checked too
    python3 - "$TMP/good.keys" "$keys" "$TMP/d/keys/server-00000.keys" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
other = open(sys.argv[3], "rb").read()
head = 32 + 8 * struct.unpack_from("<I", b, 20)[0]
b[head:head + 8] = other[head:head + 8]
def crc32c(data):
    crc = 0xffffffff
    for x in data:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
b[-4:] = struct.pack("<I", crc32c(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)
PY
    run "$SHARD" stats --verify "$TMP/d"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "hps-shard: error: $keys: slot "*" is out of order or not this server's" ]]
    cp "$TMP/good.keys" "$keys"
    # the manifest records each list's CRC; a manifest from before it (no checksum) still verifies
    python3 - "$TMP/d/manifest.json" <<'PY'
import hashlib, json, re, sys
m = json.load(open(sys.argv[1]))
assert all(re.fullmatch(r"crc32c:[0-9a-f]{8}", f["checksum"]) for f in m["servers"]["files"]), m["servers"]
for f in m["servers"]["files"]:
    del f["checksum"]
m["sha256"] = "sha256:" + "0" * 64
t = json.dumps(m, indent=2) + "\n"
t = t.replace("0" * 64, hashlib.sha256(t.encode()).hexdigest())
open(sys.argv[1], "w").write(t)
PY
    "$SHARD" stats --verify "$TMP/d" > /dev/null
}
