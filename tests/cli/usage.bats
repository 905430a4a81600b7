#!/usr/bin/env bats
# What a new user meets first: option letters, numbers as typed, hints,
# examples that run as shown (issue 31).

load helpers

setup() {
    TMP=$(mktemp -d)
}

teardown() {
    rm -rf "$TMP"
}

# "-X --long" of every tool's --help, one "X long tool" line each.
letters() {
    local t
    for t in hps-plan hps-profile hps-shard hps-train; do
        "$HPS_BIN/$t" --help | sed -nE "s/^ +-([a-zA-Z]), --([a-z0-9-]+).*/\1 \2 $t/p"
    done
}

@test "usage: a short option letter means one long option across the four tools, as hps(7) tables it" {
    letters > "$TMP/l"
    [ -s "$TMP/l" ]
    # one long name per letter, whatever the tool
    clash=$(awk '{ if (($1 in m) && m[$1] != $2) print $1": --"m[$1]" and --"$2; m[$1] = $2 }' "$TMP/l")
    [ -z "$clash" ] || { echo "$clash"; false; }
    # each pair in hps(7)'s OPTION LETTERS table, with every tool that has it
    sed -n '/^\.SS OPTION LETTERS/,/^\.TE/p' "$ROOT/man/hps.7" > "$TMP/table"
    while read -r l long tool; do
        row=$(grep -F "\\fB\\-$l\\fR	" "$TMP/table") || { echo "hps(7): no row for -$l"; false; }
        echo "$row" | grep -qF -- "\\-\\-${long//-/\\-}" || { echo "hps(7): -$l is not --$long: $row"; false; }
        echo "$row" | grep -qE "$tool|all" || { echo "hps(7): -$l lacks $tool: $row"; false; }
    done < "$TMP/l"
}

@test "usage: the old letters still work for a release, with a one-line warning naming the new one" {
    run "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$TESTDATA/models/tiny.json" -d cpu:1 --reps 1 --min-time 0 -w 0 --no-scaling -o "$TMP/p.json"
    [ "$status" -eq 0 ]
    [ -s "$TMP/p.json" ]
    [[ "$output" == *"warning: -d is deprecated for --devices"*"use -D or --devices"* ]]
    [[ "$output" == *"warning: -w is deprecated for --warmup"*"use --warmup"* ]]
    "$HPS_BIN/hps-shard" synth 50 --seed 1 -o "$TMP/d.tsv" 2>/dev/null
    run "$HPS_BIN/hps-shard" -f criteo -o "$TMP/s" "$TMP/d.tsv"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: -f is deprecated for --format"* ]]
    run "$HPS_BIN/hps-train" -p "$TMP/none.json" -d "$TMP/s"
    [[ "$output" == *"warning: -p is deprecated for --plan"*"use -P or --plan"* ]]
    # the new letters, without a warning
    run "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -q -m "$TESTDATA/models/tiny.json" -D cpu:1 --reps 1 --min-time 0 --warmup 0 --no-scaling -o "$TMP/p2.json"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "usage: rates and counts as people type them: 500k, 2e5, 1.5M; a clear error otherwise" {
    plan() {
        "$HPS_BIN/hps-plan" -q -m "$TESTDATA/models/demo-ctr.json" -c "$TESTDATA/clusters/lab.json" \
            -p "$TESTDATA/profiles/demo-ctr.json" -a greedy "$@"
    }
    plan -t 200000 > "$TMP/a.json"
    plan -t 2e5 > "$TMP/b.json"
    plan -t 200k > "$TMP/c.json"
    cmp "$TMP/a.json" "$TMP/b.json"
    cmp "$TMP/a.json" "$TMP/c.json"
    "$HPS_BIN/hps-shard" synth 1.5k --seed 1 -o "$TMP/d.tsv" 2>/dev/null
    [ "$(wc -l < "$TMP/d.tsv")" -eq 1500 ]
    run plan -t 5m
    [ "$status" -eq 2 ]
    [[ "$output" == *"--min-throughput: '5m' is not a number"*"500k, 1.5M"* ]]
    run "$HPS_BIN/hps-train" --steps 1.5 -P x -d y
    [ "$status" -eq 2 ]
    [[ "$output" == *"--steps: '1.5' is not a whole number"* ]]
}

@test "usage: an empty input is an error naming the file, in hps-shard and hps-train" {
    : > "$TMP/empty.tsv"
    run "$HPS_BIN/hps-shard" -o "$TMP/s" "$TMP/empty.tsv"
    [ "$status" -eq 2 ]
    [[ "$output" == *"error: $TMP/empty.tsv: no rows"* ]]
    [ ! -e "$TMP/s" ]
    # every line malformed and skipped: no rows either
    printf 'not a row\n' > "$TMP/bad.tsv"
    run "$HPS_BIN/hps-shard" --skip-bad -o "$TMP/s" "$TMP/bad.tsv"
    [ "$status" -eq 2 ]
    [[ "$output" == *"$TMP/bad.tsv: no rows: all 1 line was malformed"* ]]
    # training shards of no rows (the one row went to the holdout): no 0-step run, no nan
    "$HPS_BIN/hps-shard" synth 1 --seed 1 -o "$TMP/one.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q --holdout 0.5 -o "$TMP/h" "$TMP/one.tsv"
    "$HPS_BIN/hps-plan" -q -m "$TESTDATA/models/demo-ctr.json" -c "$TESTDATA/clusters/lab.json" \
        -p "$TESTDATA/profiles/demo-ctr.json" -t 1000 -o "$TMP/plan.json"
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$TMP/h" --cpu-fallback
    [ "$status" -eq 2 ]
    [[ "$output" == *"error: $TMP/h: its train shards hold no rows"* ]]
    [[ "$output" != *nan* ]]
}

@test "usage: a plan made from a piped profile keeps it: show and --explain need no -p" {
    # one profile, piped and named: two measurements would differ (its
    # device_rows_ms is this machine's, measured)
    "$HPS_BIN/hps-profile" --machine "$(machine_profile)" -m "$TESTDATA/models/demo-ctr.json" --reps 2 --warmup 0 --min-time 0 --estimate "$TESTDATA/devices/gpu-t4.json" \
        -o "$TMP/p.json" 2>/dev/null
    "$HPS_BIN/hps-plan" -q -m "$TESTDATA/models/demo-ctr.json" -c "$TESTDATA/clusters/lab.json" -p - -t 20000 \
        -o "$TMP/plan.json" < "$TMP/p.json"
    run "$HPS_BIN/hps-plan" show "$TMP/plan.json" -f table
    [ "$status" -eq 0 ]
    [[ "$output" == *"plan for demo-ctr"* ]]
    # the same table as from the profile named on the command line
    [ "$output" = "$("$HPS_BIN/hps-plan" show "$TMP/plan.json" -f table -p "$TMP/p.json")" ]
    run "$HPS_BIN/hps-plan" --explain "$TMP/plan.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *"gpu-t4"* ]]
    # a plan that kept no copy (an older hps-plan's) says what to run
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); del d['inputs']['stdin_profile']; json.dump(d, open(sys.argv[1], 'w'))" "$TMP/plan.json"
    run "$HPS_BIN/hps-plan" show "$TMP/plan.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"the plan holds no copy; name the profile: hps-plan show $TMP/plan.json -p PROFILE"* ]]
}

@test "usage: where the fix is known the error says it: a spec sheet, the kind of file given, a misspelt field" {
    # a device no profile has, with a spec sheet in testdata/devices: the command that estimates it
    run "$HPS_BIN/hps-plan" -m "$TESTDATA/models/demo-ctr.json" -c "$TESTDATA/clusters/aws.json" \
        -p "$TESTDATA/profiles/demo-ctr-cpu.json" -t 10
    [ "$status" -eq 2 ]
    [[ "$output" == *"device 'gpu-t4' is in no profile; estimate it from its spec sheet: hps-profile -m $TESTDATA/models/demo-ctr.json --estimate $TESTDATA/devices/gpu-t4.json -o PROFILE"* ]]
    # a file of one kind where another is expected
    run "$HPS_BIN/hps-plan" -m "$TESTDATA/profiles/demo-ctr.json" -c "$TESTDATA/clusters/lab.json" \
        -p "$TESTDATA/profiles/demo-ctr.json" -t 10
    [ "$status" -eq 2 ]
    [[ "$output" == *"a profile given where a model is expected"* ]]
    echo '{"name": "x", "layers": []}' > "$TMP/noformat.json"
    run "$HPS_BIN/hps-plan" show "$TMP/noformat.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"noformat.json: missing field 'format': expected a plan (\"format\": \"hps-plan\")"* ]]
    printf '{"event": "step", "step": 1}\n{"event": "step", "step": 2}\n' > "$TMP/metrics.ndjson"
    run "$HPS_BIN/hps-plan" show "$TMP/metrics.ndjson"
    [ "$status" -eq 2 ]
    [[ "$output" == *"metrics.ndjson:2: one JSON value a line (NDJSON, as hps-train --metrics writes"* ]]
    # --data given a shard file, a raw TSV, a manifest
    "$HPS_BIN/hps-shard" synth 100 --seed 1 -o "$TMP/d.tsv" 2>/dev/null
    "$HPS_BIN/hps-shard" -q -o "$TMP/s" "$TMP/d.tsv"
    "$HPS_BIN/hps-plan" -q -m "$TESTDATA/models/demo-ctr.json" -c "$TESTDATA/clusters/lab.json" \
        -p "$TESTDATA/profiles/demo-ctr.json" -t 1000 -o "$TMP/plan.json"
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$TMP/s/shard-00000.hps"
    [ "$status" -eq 2 ]
    [[ "$output" == *"$TMP/s/shard-00000.hps: is one shard file; give the directory that holds it and its manifest.json ($TMP/s)"* ]]
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$TMP/d.tsv"
    [ "$status" -eq 2 ]
    [[ "$output" == *"$TMP/d.tsv: is a file, not a directory of shards; if it is Criteo TSV or libsvm text, shard it first: hps-shard -o DIR $TMP/d.tsv"* ]]
    run "$HPS_BIN/hps-train" --plan "$TMP/plan.json" --data "$TMP/s/manifest.json"
    [[ "$output" == *"give the directory of the shards, not its manifest ($TMP/s)"* ]]
    # a misspelt field of a JSON input: did you mean, as for options
    sed 's/"activation"/"activaton"/' "$TESTDATA/models/demo-ctr.json" > "$TMP/typo.json"
    run "$HPS_BIN/hps-profile" -m "$TMP/typo.json" --estimate "$TESTDATA/devices/gpu-t4.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown field 'activaton'; did you mean 'activation'?"* ]]
}

@test "usage: the tables' words agree with their numbers, and a column's numbers read one way" {
    run "$HPS_BIN/hps-plan" -q -m "$TESTDATA/models/demo-ctr.json" -c "$TESTDATA/clusters/lab.json" \
        -p "$TESTDATA/profiles/demo-ctr.json" -t 20000 -a exact -f table
    [ "$status" -eq 0 ]
    [[ "$output" == *"total  1 unit, "* ]]
    [[ "$output" == *"1 episode, optimal"* ]]
    [[ "$output" == *"cost at >= 20000 samples/s, 100M samples x 1 epoch"* ]]
    [[ "$output" != *"e+0"* ]]
    run "$HPS_BIN/hps-profile" show "$TESTDATA/profiles/demo-ctr.json" -f table
    [[ "$output" == *"device gpu-t4 (gpu, estimated): NVIDIA T4 (estimated)"$'\n'* ]]
    [[ "$output" != *"0 threads"* ]]
    [[ "$output" != *"threads, 2 threads"* ]]
}

@test "usage: the bash completions work in a bash without the bash-completion package" {
    mkdir "$TMP/dir" && touch "$TMP/dir/plan.json" "$TMP/dir/notes.txt"
    for t in hps-plan hps-profile hps-shard hps-train; do
        # a bare bash: no bash-completion, so no _init_completion nor _filedir
        run env -i HOME="$TMP" PATH="$PATH" bash --norc --noprofile -c '
            source "$1" || exit 1
            fn=$(complete -p "$2" | sed -E "s/.*-F ([^ ]+) .*/\1/")
            COMP_WORDS=("$2" --versi) COMP_CWORD=1; "$fn" 2>&1; echo "opts: ${COMPREPLY[*]}"
            COMP_WORDS=("$2" -m "$3/") COMP_CWORD=2; "$fn" 2>&1; echo "files: ${COMPREPLY[*]}"' \
            _ "$ROOT/completions/bash/$t" "$t" "$TMP/dir"
        [ "$status" -eq 0 ] || { echo "$t: $output"; false; }
        [[ "$output" != *"command not found"* ]] || { echo "$t: $output"; false; }
        [[ "$output" == *"opts: --version"* ]] || { echo "$t: $output"; false; }
        [[ "$output" == *"files: $TMP/dir/plan.json"* ]] || { echo "$t: $output"; false; }
        [[ "$output" != *notes.txt* ]] || { echo "$t: $output"; false; }
    done
}
