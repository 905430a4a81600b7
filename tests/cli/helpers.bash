# Shared by the bats files: where the binaries and the test data are.
HPS_BIN=${HPS_BIN:-$BATS_TEST_DIRNAME/../../bin}
# hps-train with the testing aids (--slowdown, HPS_TRAIN_KILL_AT_STEP): make test builds it
HPS_TEST_BIN=${HPS_TEST_BIN:-$BATS_TEST_DIRNAME/../../build/test-bin}
ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
TESTDATA=$ROOT/testdata
GOLDEN=$BATS_TEST_DIRNAME/golden

# Compares OUT with the golden file GOLD; `make golden` (HPS_UPDATE_GOLDEN=1)
# writes OUT over GOLD instead, for a change of output that is meant.
golden_check() {
    if [ "${HPS_UPDATE_GOLDEN:-}" = 1 ]; then cp "$2" "$1"; else diff -u "$1" "$2"; fi
}

# This machine's figures for hps-profile --machine FILE (sgemm, triad, gather,
# hand-off: about two CPU-seconds a profile whatever the model), measured
# once a bats file, on the first call, for the devices the tests profile
# (cpu:1, cpu:2, cpu); prints the file.  Measured here rather than kept in
# testdata: a fixture's CPU is not this one (a warning a run, and hps-plan
# would price hand-offs and reductions at another machine's rates) and
# `cpu` is as many threads as this machine has.  Tests of the benchmarks
# themselves profile without it.
machine_profile() {
    local f=$BATS_FILE_TMPDIR/machine.json
    if [ ! -s "$f" ]; then
        "$HPS_BIN/hps-profile" -q -m "$TESTDATA/models/tiny.json" -D cpu:1,cpu:2,cpu --reps 1 --warmup 0 \
            --min-time 0 --no-scaling -o "$f.tmp" && mv "$f.tmp" "$f" || return 1
    fi
    echo "$f"
}

# Every long option that TOOL --help lists must appear in its completions and man page.
check_options_documented() {
    local tool=$1 opts missing=""
    opts=$("$HPS_BIN/$tool" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u)
    [ -n "$opts" ]
    for o in $opts; do
        grep -q -- "$o" "$ROOT/completions/bash/$tool" || missing="$missing bash:$o"
        grep -q -- "$o" "$ROOT/completions/zsh/_$tool" || missing="$missing zsh:$o"
        # man pages escape the leading dashes: \-\-option
        grep -qF -- "\\-\\-${o#--}" "$ROOT/man/$tool.1" || missing="$missing man:$o"
    done
    [ -z "$missing" ] || { echo "undocumented:$missing"; return 1; }
}

# Runs a command line with a terminal for its stdin and stdout (script(1),
# from Debian's bsdutils).
on_terminal() {
    script -qec "$1" /dev/null < /dev/null
}

json_field() { # FILE EXPR: a python expression over d, a JSON document or NDJSON's last record
    python3 -c "
import json, sys
text = open(sys.argv[1]).read()
try:
    d = json.loads(text)
except ValueError:
    d = json.loads(text.strip().splitlines()[-1])
print($2)" "$1"
}

# The keys of a safetensors export: every *.keys tensor's, one "tensor key" a line.
export_keys() {
    python3 - "$1" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", b)[0]
h = json.loads(b[8:8 + n])
for k, v in sorted(h.items()):
    if k.endswith(".keys"):
        s, e = v["data_offsets"]
        for (key,) in struct.iter_unpack("<q", b[8 + n + s:8 + n + e]):
            print(k, key)
PY
}

# Three synthetic days with drift in DIR (exported as $DAYS): DIR/day-0N as
# text and DIR/sN sharded for criteo-small (days.bats, tables.bats).
synth_days() { # DIR
    export DAYS=$1
    "$HPS_BIN/hps-shard" synth 20000 --days 3 --drift 0.2 --seed 5 --scale 0.001 -o "$DAYS" 2>/dev/null
    for d in 1 2 3; do
        "$HPS_BIN/hps-shard" -q -m "$TESTDATA/models/criteo-small.json" -o "$DAYS/s$d" "$DAYS/day-0$d"
    done
}
