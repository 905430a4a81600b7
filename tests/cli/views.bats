#!/usr/bin/env bats
# Views of files made before (hps-plan show, hps-profile show, hps-train show),
# the pictures hps draws (checked by rendering them to PNG), and the paper
# cuts of the shared command-line layer.

load helpers

M=$TESTDATA/models
C=$TESTDATA/clusters
P=$TESTDATA/profiles

setup() {
    TMP=$(mktemp -d)
    cd "$ROOT"
}

teardown() {
    rm -rf "$TMP"
}

plan() { "$HPS_BIN/hps-plan" "$@"; }

# DLRM with two embedding tables and a bottom MLP, cut at the merge layer
# whatever the cost model prefers (the bottom on T4s, the interaction and
# the top on A100s), rows on the servers: the drawing then has servers and
# two stages, and every stream crosses the cut
dlrm_plan() {
    plan -m $M/dlrm-criteo.json -c $C/aws.json -p $P/dlrm-criteo.json --min-throughput 1000000 -a exact \
        --rows servers --micro-batches 64 -o "$TMP/dlrm-made.json"
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["assignment"]=["gpu-t4"]*4+["gpu-a100"]*4
json.dump(p,open(sys.argv[2],"w"))' "$TMP/dlrm-made.json" "$TMP/dlrm-cut.json"
    plan show "$TMP/dlrm-cut.json" "$@"
}

# An SVG that librsvg renders to a PNG; of the size it declares when that is
# in pixels (Graphviz declares points).
renders() {
    rsvg-convert "$1" -o "$1.png"
    python3 - "$1" "$1.png" <<'PY'
import re, struct, sys
svg = open(sys.argv[1]).read()
png = open(sys.argv[2], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pw, ph = struct.unpack(">II", png[16:24])
assert pw > 100 and ph > 100, (pw, ph)
m = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg)
assert not m or (pw, ph) == tuple(map(int, m.groups())), (pw, ph, m.groups())
PY
}

@test "views: show renders a saved plan as the search printed it" {
    plan -m $M/demo-ctr.json -c $C/aws.json -p $P/demo-ctr.json --min-throughput 1000000 -a exact -o "$TMP/plan.json"
    plan show "$TMP/plan.json" -f table > "$TMP/table"
    diff -u "$GOLDEN/plan/demo-ctr-aws.table" "$TMP/table"
    plan show "$TMP/plan.json" -f dot > "$TMP/dot"
    diff -u "$GOLDEN/plan/demo-ctr-aws.dot" "$TMP/dot"
    plan show "$TMP/plan.json" > "$TMP/again.json"
    python3 -c 'import json,sys; assert json.load(open(sys.argv[1])) == json.load(open(sys.argv[2]))' \
        "$TMP/plan.json" "$TMP/again.json"
}

@test "views: show of a hand-edited plan claims no optimality it cannot know" {
    plan -m $M/demo-ctr.json -c $C/aws.json -p $P/demo-ctr.json --min-throughput 100000 -a exact -o "$TMP/plan.json"
    run plan show "$TMP/plan.json" -f table
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" == "search exact, seed 1, "*" episode"*", optimal" ]]
    # the loss moved by hand to a CPU: still feasible, dearer than the optimum it records
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); p["assignment"][6] = "cpu-c5"
json.dump(p, open(sys.argv[2], "w"))' "$TMP/plan.json" "$TMP/edited.json"
    plan show "$TMP/edited.json" -f table > "$TMP/table" 2> "$TMP/err"
    [[ "$(tail -n 1 "$TMP/table")" == "search exact, seed 1, "*" episode"*", optimum not known" ]]
    grep -qE "^hps-plan: warning: $TMP/edited.json: evaluated again, its cost is [0-9.]+, not the [0-9.]+ it records \(edited, or other inputs\): its optimality is not known$" "$TMP/err"
    [ "$(plan show "$TMP/edited.json" 2>/dev/null | python3 -c 'import json,sys; s = json.load(sys.stdin)["search"]; print(s["optimal"], s["gap"])')" = "False None" ]
    # and a plan that claims optimality it never had, with no optimum recorded
    python3 -c 'import json,sys; p = json.load(open(sys.argv[1])); p["assignment"][6] = "cpu-c5"; p["search"]["optimum"] = None
json.dump(p, open(sys.argv[2], "w"))' "$TMP/plan.json" "$TMP/claimed.json"
    run plan show "$TMP/claimed.json" -f table
    [[ "${lines[-1]}" == *", optimum not known" ]]
}

@test "views: show refuses a plan whose cluster changed" {
    plan -m $M/demo-ctr.json -c $C/aws.json -p $P/demo-ctr.json --min-throughput 1000000 -a exact -o "$TMP/plan.json"
    python3 -c 'import json,sys; c = json.load(open(sys.argv[1])); c["resources"][0]["price_per_hour"] *= 2
json.dump(c, open(sys.argv[2], "w"))' $C/aws.json "$TMP/aws.json"
    run plan show "$TMP/plan.json" -c "$TMP/aws.json" -f table
    [ "$status" -eq 2 ]
    [ "$output" = "hps-plan: error: $TMP/aws.json: the plan was made for another cluster (digests differ)" ]
}

@test "views: the dot drawing is the model's data flow with stages, servers, links and a legend" {
    dlrm_plan -f dot > "$TMP/dlrm.dot"
    golden_check "$GOLDEN/views/dlrm-criteo-aws.dot" "$TMP/dlrm.dot"
    # both tables and the bottom MLP flow into the interaction layer
    grep -q 'l0 -> l4 \[penwidth' "$TMP/dlrm.dot"
    grep -q 'l1 -> l4 \[penwidth' "$TMP/dlrm.dot"
    grep -q 'l3 -> l4 \[penwidth' "$TMP/dlrm.dot"
    ! grep -q 'l0 -> l1' "$TMP/dlrm.dot"
    dot -Tsvg "$TMP/dlrm.dot" -o "$TMP/dlrm-dot.svg"
    renders "$TMP/dlrm-dot.svg"
}

@test "views: a plan's SVG has a samples/s axis under its bars, one stage too" {
    plan -m $M/demo-ctr.json -c $C/aws.json -p $P/demo-ctr.json --min-throughput 1000000 -o "$TMP/one.json"
    [ "$(json_field "$TMP/one.json" 'len(d["stages"])')" = 1 ]
    plan show "$TMP/one.json" -f svg -o "$TMP/one.svg"
    renders "$TMP/one.svg"
    dlrm_plan -f svg -o "$TMP/two.svg"
    for svg in "$TMP/one.svg" "$TMP/two.svg"; do
        python3 - "$svg" <<'EOF2'
import re, sys
svg = open(sys.argv[1]).read()
bars = [(float(x), float(y), float(w)) for x, y, w in
        re.findall(r'<rect x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)" height="22.0" fill="#f2f2f2"', svg)]
assert bars, "no bars"
x0, w = bars[0][0], bars[0][2]
under = max(y for _, y, _ in bars) + 22
rule = re.search(r'<line x1="%.1f" y1="([0-9.]+)" x2="%.1f" y2="\1"' % (x0, x0 + w), svg)
assert rule and float(rule.group(1)) >= under, "no axis rule under the bars"
ay = float(rule.group(1))
ticks = [(float(x), t) for x, y, t in re.findall(
    r'<text x="([0-9.]+)" y="([0-9.]+)" font-size="11" text-anchor="middle" font-weight="normal" fill="#333333">([^<]*)<', svg)
    if ay < float(y) < ay + 24]
assert len(ticks) >= 3 and ticks[0] == (x0, "0"), ticks
assert all(x0 <= x <= x0 + w for x, _ in ticks) and [x for x, _ in ticks] == sorted(x for x, _ in ticks), ticks
assert all(b[0] - a[0] >= 3.5 * (len(a[1]) + len(b[1])) for a, b in zip(ticks, ticks[1:])), ticks  # apart
assert re.search(r'>samples/s</text>', svg), "no axis label"
EOF2
    done
}

@test "views: the plan and the Pareto frontier as SVG pictures render" {
    dlrm_plan -o "$TMP/plan.json"
    plan show "$TMP/plan.json" -f svg -o "$TMP/plan.svg"
    renders "$TMP/plan.svg"
    grep -q 'stage 1: gpu-a100 x 2' "$TMP/plan.svg"
    grep -q 'parameter servers: 16, ' "$TMP/plan.svg" # beside the 16 T4s (issue 29)
    plan -m $M/demo-ctr.json -c $C/lab.json -p $P/demo-ctr.json --min-throughput 20000 -a greedy \
        --pareto -f svg -o "$TMP/pareto.svg"
    renders "$TMP/pareto.svg"
    grep -q '<polyline' "$TMP/pareto.svg"
}

@test "views: the Pareto SVG plots the table's objective per job, its legend under the frame, clear of the line" {
    plan -m $M/demo-ctr.json -c $C/lab.json -p $P/demo-ctr.json --min-throughput 20000 -a greedy \
        --pareto -f svg -o "$TMP/pareto.svg"
    plan -m $M/demo-ctr.json -c $C/lab.json -p $P/demo-ctr.json --min-throughput 20000 -a greedy \
        --pareto -f json -o "$TMP/pareto.json"
    grep -q '>cost (\$ per job)<' "$TMP/pareto.svg"
    python3 - "$TMP/pareto.svg" "$TMP/pareto.json" <<'EOF'
import json, re, sys
svg, pts = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))["points"]
# each point's line under the chart gives the objective the table gives
for p in pts[:5]:
    assert "cost %.4g:" % p["objective"] in svg, p["objective"]
# the frame's bottom edge, and the legend's text below it
frame = re.search(r'<rect x="90.0" y="50.0" width="660.0" height="([0-9.]+)"', svg)
legend = re.search(r'<text x="[0-9.]+" y="([0-9.]+)"[^>]*>the best plan reaching', svg)
assert frame and legend and float(legend.group(1)) > 50 + float(frame.group(1)) + 34, svg
EOF
}

@test "views: --pareto rows keep the limit that produced them; -f json gives stages as objects" {
    plan -m $M/demo-ctr.json -c $C/lab.json -p $P/demo-ctr.json --min-throughput 20000 -a greedy \
        --rows servers --pareto -f table > "$TMP/table"
    golden_check "$GOLDEN/views/demo-ctr-lab-pareto.table" "$TMP/table"
    plan -m $M/demo-ctr.json -c $C/lab.json -p $P/demo-ctr.json --min-throughput 20000 -a greedy \
        --pareto > "$TMP/p.json"
    python3 - "$TMP/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 2
for p in d["points"]:
    assert p["min_throughput"] <= p["throughput"]
    for s in p["stages"]:
        assert set(s) == {"type", "layers", "units", "throughput"}, s
        assert s["units"] >= 1 and s["throughput"] >= p["throughput"] * (1 - 1e-9)
PY
}

@test "views: --explain -f json has every layer on every type" {
    plan -m $M/demo-ctr.json -c $C/aws.json -p $P/demo-ctr.json --min-throughput 1000000 -a exact -o "$TMP/plan.json"
    plan --explain "$TMP/plan.json" -f json > "$TMP/e.json"
    plan --explain "$TMP/plan.json" > "$TMP/e.txt"
    python3 - "$TMP/e.json" "$TMP/e.txt" "$TMP/plan.json" $C/aws.json <<'PY'
import json, sys
e = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read(); plan = json.load(open(sys.argv[3]))
types = {r["name"] for r in json.load(open(sys.argv[4]))["resources"]}
assert e["format"] == "hps-explain" and e["feasible"]
assert [l["name"] for l in e["layers"]] == [n for s in plan["stages"] for n in s["layer_names"]]
for l in e["layers"]:
    assert set(l["on"]) == types
    # the plan's own type gives the plan's value
    assert abs(l["on"][l["type"]]["objective"] - e["value"]) <= 1e-9 * e["value"]
assert ("%.6g" % e["value"]) in text.splitlines()[0]
PY
    run plan --explain "$TMP/plan.json" -f dot
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "hps-plan: error: --format: 'dot' is not one of text, json" ]]
}

@test "views: hps-profile show prints a saved profile as a table or JSON" {
    "$HPS_BIN/hps-profile" show $P/tiny.json -f table > "$TMP/t"
    grep -q '^model tiny, batch 8' "$TMP/t"
    grep -q '^device gpu-t4' "$TMP/t"
    "$HPS_BIN/hps-profile" show $P/tiny.json > "$TMP/p.json"
    python3 - "$TMP/p.json" $P/tiny.json <<'PY'
import json, sys
def same(a, b):  # numbers to 6 significant digits: the writer's precision
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b
assert same(json.load(open(sys.argv[1]))["devices"], json.load(open(sys.argv[2]))["devices"])
PY
}

# A device's name is the machine's own words, and a file may say anything:
# a newline or an escape sequence reached the terminal raw.
@test "views: hps-profile show -f table and its errors echo names from the file on one line each" {
    python3 - $P/tiny.json "$TMP/evil.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
d = p["devices"][0]
d["name"] = "Xeon\n\x1b[2J\x1b]0;pwned\x07"
d["layers"][0]["name"] = "emb\rx"
p["model"]["name"] = "tiny\x1b[31m"
json.dump(p, open(sys.argv[2], "w"))
p["devices"].append(dict(d))
p["devices"][1]["id"] = d["id"] = "cpu\x1b[1m\n"
json.dump(p, open(sys.argv[2] + ".twice", "w"))
PY
    "$HPS_BIN/hps-profile" show "$TMP/evil.json" -f table > "$TMP/t"
    ! grep -q $'\x1b\|\r\|\x07' "$TMP/t" || false
    grep -q '^model tiny?\[31m, batch 8$' "$TMP/t"
    grep -q '): Xeon??\[2J?\]0;pwned?, [0-9]* threads$' "$TMP/t"
    grep -q '^  0   emb?x ' "$TMP/t"
    run "$HPS_BIN/hps-profile" show "$TMP/evil.json.twice" -f table
    [ "$status" -eq 2 ]
    [ "$output" = "hps-profile: error: $TMP/evil.json.twice: device 'cpu?[1m?' appears twice" ]
}

@test "views: a bad -f lists the choices and suggests the nearest" {
    run plan show plan.json -f tabel
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "hps-plan: error: --format: 'tabel' is not one of json, table, dot, svg; did you mean 'table'?" ]
    [ "${lines[1]}" = "try 'hps-plan --help'" ]
    run "$HPS_BIN/hps-profile" -m x -f yaml
    [ "${lines[0]}" = "hps-profile: error: --format: 'yaml' is not one of json, table" ]
    [ "${lines[1]}" = "try 'hps-profile --help'" ]
}

@test "views: mistyped options and commands suggest the nearest, in one style" {
    for t in hps-plan hps-profile hps-shard hps-train; do
        run "$HPS_BIN/$t" --verbsoe
        [ "$status" -eq 2 ]
        [ "${lines[0]}" = "$t: error: unknown option '--verbsoe'; did you mean '--verbose'?" ]
        [ "${lines[1]}" = "try '$t --help'" ]
    done
    run plan shwo x.json
    [ "${lines[0]}" = "hps-plan: error: 'shwo' is not a command; did you mean 'show'?" ]
    run "$HPS_BIN/hps-shard" stast x
    [ "${lines[0]}" = "hps-shard: error: 'stast' is not a command; did you mean 'stats'?" ]
    run plan -m
    [ "${lines[0]}" = "hps-plan: error: option '-m' needs a value" ]
    run plan --ver
    [ "${lines[0]}" = "hps-plan: error: option '--ver' is ambiguous: --verbose, --version" ]
}

@test "views: --version names the commit, MPI, the BLAS kernel set and build" {
    for t in hps-plan hps-profile hps-shard hps-train; do
        run "$HPS_BIN/$t" --version
        [ "$status" -eq 0 ]
        [[ "${lines[1]}" == "commit: "* ]]
        [[ "${lines[1]}" != "commit: unknown" ]]
        [[ "${lines[2]}" == "features: openblas zstd jansson"* ]]
        [[ "$output" == *"blas-build: OpenBLAS "* ]]
        printf '%s\n' "$output" | grep -qE '^blas: openblas [A-Za-z0-9]+$' # the kernel set in use
        # Open MPI's version, or that make MPI=0 built it without
        if [[ "${lines[2]}" == *" mpi"* ]]; then
            [[ "$output" == *"mpi: Open MPI "* ]]
        else
            [[ "$output" == *"mpi: none (built with MPI=0: one process only)"* ]]
        fi
    done
}

@test "views: a tool waiting for JSON on a terminal says so and stops" {
    run on_terminal "$HPS_BIN/hps-plan -m $M/demo-ctr.json -c $C/aws.json --min-throughput 1"
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-plan: error: <stdin>: is a terminal; pipe the input in or name a file"* ]]
}

@test "views: -D cpu:N beyond the cores warns" {
    local n=$(( $(nproc) + 1 ))
    run "$HPS_BIN/hps-profile" -m $M/tiny.json -D cpu:$n --reps 1 --min-time 0 --warmup 0 --no-scaling -o "$TMP/p.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: --devices: 'cpu:$n' asks for $n threads on $(nproc) cores"* ]]
}

@test "views: hps-shard reports the decompressed size of .zst input" {
    "$HPS_BIN/hps-shard" synth 5000 --seed 1 --scale 0.001 -o "$TMP/rows.tsv" 2>/dev/null
    zstd -q -19 "$TMP/rows.tsv" -o "$TMP/rows.tsv.zst"
    local text=$(stat -c %s "$TMP/rows.tsv") packed=$(stat -c %s "$TMP/rows.tsv.zst")
    run "$HPS_BIN/hps-shard" -m $M/criteo-small.json -o "$TMP/s" "$TMP/rows.tsv.zst"
    [ "$status" -eq 0 ]
    local want
    want=$(python3 -c "print('%.1f MB (%.1f MB compressed) ->' % ($text / 1e6, $packed / 1e6))")
    [[ "$output" == *"5000 rows in 1 shard, $want"* ]]
    run "$HPS_BIN/hps-shard" -m $M/criteo-small.json --shuffle -o "$TMP/s2" "$TMP/rows.tsv.zst"
    [ "$status" -eq 0 ]
    [[ "$output" == *"5000 rows in 1 shard, $want"* ]]
}

@test "views: the pipeline Makefile redoes a step when its variable changes, and nothing when up to date" {
    local mk=$ROOT/testdata/pipeline/Makefile
    ! grep -n ' $' "$mk"
    ! grep -nE '^[A-Z_]+ +\?=.*#' "$mk" # a comment after a value puts spaces in it
    cd "$TMP"
    "$HPS_BIN/hps-shard" synth 20000 --seed 1 --scale 0.001 -o data.tsv 2>/dev/null
    cp "$M/criteo-small.json" model.json
    cp "$C/lab.json" cluster.json
    cp "$TESTDATA/devices/gpu-t4.json" .
    pipeline() {
        make --no-print-directory -f "$mk" HPS="$HPS_BIN/" GPUS=gpu-t4.json \
            PROFILE_FLAGS="--reps 2 --warmup 0 --no-scaling --min-time 0" TRAIN_FLAGS="--cpu-fallback --threads 1 --steps 5" "$@" 2>&1
    }
    pipeline MIN_THROUGHPUT=20000 > first
    grep -q 'hps-profile -m' first && grep -q 'hps-train --plan' first
    pipeline MIN_THROUGHPUT=20000 > second
    ! grep -q 'hps-' second
    pipeline MIN_THROUGHPUT=30000 > third
    ! grep -q 'hps-profile -m' third
    grep -q 'hps-plan -m model.json' third && grep -q -- '--min-throughput 30000' third
    grep -q 'hps-shard -m' third && grep -q 'hps-train --plan' third
    grep -q 'hps-plan show plan.json -f table -o plan.txt' third
    # plan.txt is the plan on disk, not a second search
    "$HPS_BIN/hps-plan" show plan.json -f table | diff - plan.txt
}

@test "views: make check's runner shows each test's lines as they come" {
    cp "$ROOT/tests/run.sh" "$TMP/run.sh" # alone: no tests/cli beside it
    cat > "$TMP/fake" <<EOS
#!/bin/sh
echo "ok 1 - first"
i=0
while [ ! -e "$TMP/seen" ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
if [ -e "$TMP/seen" ]; then echo "ok 2 - second"; else echo "not ok 2 - the first line was held back"; fi
EOS
    chmod +x "$TMP/fake"
    "$TMP/run.sh" "$TMP/fake" > "$TMP/out" &
    for i in $(seq 100); do grep -q "fake: ok 1 - first" "$TMP/out" && break; sleep 0.1; done
    touch "$TMP/seen"
    wait
    cat "$TMP/out"
    grep -q "^2 passed, 0 failed, 0 skipped" "$TMP/out"
}

@test "views: --rankfile gives each unit its threads" {
    python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))
for r in c["resources"]:
    if r["kind"] == "cpu": r["threads"] = 4
json.dump(c, open(sys.argv[2], "w"))' $C/lab.json "$TMP/lab.json"
    plan -m $M/demo-ctr.json -c "$TMP/lab.json" -p $P/demo-ctr.json --min-throughput 20000 -a fixed:cpu \
        --rankfile "$TMP/ranks" -o "$TMP/plan.json"
    cat "$TMP/ranks"
    python3 - "$TMP/plan.json" "$TMP/ranks" <<'PY'
import json, re, sys
p = json.load(open(sys.argv[1]))
ranks = {}
for line in open(sys.argv[2]):
    m = re.fullmatch(r"rank (\d+)=(\S+) slot=(\d+)(?:-(\d+))?\n", line)
    a = int(m[3]); b = int(m[4]) if m[4] else a
    ranks[int(m[1])] = (m[2], set(range(a, b + 1)))
cpu_workers = [w for w in p["workers"] if w["type"] == "cpu"]
assert cpu_workers, "the plan should use cpu units"
beside = {w: p["servers"]["ranks"][i] for i, w in enumerate(p["servers"]["beside"]) if w is not None}
for w in p["workers"]:
    node, cores = ranks[w["rank"]]
    n = 4 if w["type"] == "cpu" else 1
    if w["rank"] in beside:  # its server takes the last of the unit's cores (issue 29)
        s_node, s_cores = ranks[beside[w["rank"]]]
        assert s_node == node and s_cores == {max(cores) + 1}, (w, cores, s_cores)
        n -= 1
    assert node == w["node"] and len(cores) == n, (w, cores)
for node in {n for n, _ in ranks.values()}:
    sets = [c for n, c in ranks.values() if n == node]
    assert sum(map(len, sets)) == len(set().union(*sets)), (node, sets)  # no core twice
PY
}

@test "views: binary output to a terminal is refused" {
    run on_terminal "$HPS_BIN/hps-train --model $M/tiny.json --data $TMP/none --export -"
    [ "$status" -eq 2 ]
    [[ "$output" == *"hps-train: error: --export -: not writing safetensors to a terminal; redirect stdout or name a file"* ]]
}

@test "views: README's pipeline block works pasted into a fresh shell" {
    # the block after "## A pipeline", with the binaries under test for bin/
    awk '/^## A pipeline/ {on = 1} on && /^```$/ && inside {exit} inside {print} on && /^```sh$/ {inside = 1}' \
        "$ROOT/README.md" | sed "s|export PATH=\$PWD/bin:|export PATH=$HPS_BIN:|" > "$TMP/block.sh"
    grep -q 'hps-train --plan plan.json' "$TMP/block.sh"
    run env -i HOME="$HOME" PATH=/usr/bin:/bin bash -e -c "cd '$ROOT' && . '$TMP/block.sh' && ls"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    for f in plan.json shards model.safetensors metrics.ndjson plan.svg graph.svg curves.svg; do
        [[ "$output" == *"$f"* ]]
    done
}

@test "views: -q means errors only in every tool" {
    run "$HPS_BIN/hps-profile" -q -m $M/tiny.json -D cpu:999 --reps 1 --min-time 0 --warmup 0 --no-scaling -o "$TMP/p.json"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    run "$HPS_BIN/hps-profile" -q -m "$TMP/missing.json"
    [ "$status" -eq 2 ]
    [ "$output" = "hps-profile: error: $TMP/missing.json: cannot open: No such file or directory" ]
    run "$HPS_BIN/hps-shard" synth 10 -q -o "$TMP/x.tsv"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    # a warning is not an error
    run "$HPS_BIN/hps-shard" -q --skip-bad -m $M/criteo-small.json -o "$TMP/s" $TESTDATA/data/criteo-bad-fields.tsv
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    run "$HPS_BIN/hps-shard" --skip-bad -m $M/criteo-small.json -o "$TMP/s2" $TESTDATA/data/criteo-bad-fields.tsv
    [[ "$output" == *"warning: skipped"* ]]
}

# The SVG tick loop stood still when two values were one ulp apart (steps
# 1e17 and 1e17+16) and filled the disk; values near the double's limits
# gave inf and nan coordinates.  head ends a runaway picture (SIGPIPE).
@test "views: hps-train show draws degenerate and extreme ranges with finite coordinates" {
    printf '{"event":"step","step":100000000000000000,"loss":0.5}\n{"event":"step","step":100000000000000016,"loss":0.5}\n{"event":"step","step":100000000000000032,"loss":0.5000000000000001}\n' \
        > "$TMP/ulp.ndjson"
    printf '{"event":"step","step":1,"loss":1e17}\n{"event":"step","step":2,"loss":100000000000000016}\n' \
        > "$TMP/loss.ndjson"
    printf '{"event":"step","step":1e308,"loss":1e308,"samples_per_s":1e-308}\n{"event":"step","step":-1e308,"loss":-1e308,"samples_per_s":1.7e308}\n{"event":"eval","step":-1e308,"logloss":1e300,"auc":-1e308}\n' \
        > "$TMP/huge.ndjson"
    for m in ulp loss huge; do
        run bash -c "set -o pipefail; '$HPS_BIN/hps-train' show '$TMP/$m.ndjson' | head -c 4000000 > '$TMP/$m.svg'"
        [ "$status" -eq 0 ] || { echo "$m: $output"; false; }
        ! grep -E '"[^"]*(nan|inf)' "$TMP/$m.svg" || false
        renders "$TMP/$m.svg"
    done
    # the step axis of the first: ticks that differ, about 1e17
    python3 - "$TMP/ulp.svg" <<'PY'
import re, sys
svg = open(sys.argv[1]).read()
ticks = re.findall(r'font-size="11" text-anchor="middle" font-weight="normal" fill="#333333">([^<]*)<', svg)
x = [float(t) for t in ticks[:5]]
assert len(set(x)) == len(x) >= 3 and all(abs(v / 1e17 - 1) < 1e-6 for v in x), ticks
PY
}
