#!/usr/bin/env bats
# hps-plan --jobs: several jobs on one shared cluster, the joint plan and
# its pictures, and the jobs file's errors.

load helpers
HPS_BIN=${HPS_BIN:-$BATS_TEST_DIRNAME/../../bin}
ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
THREE=testdata/jobs/three.json

setup() {
    TMP=$(mktemp -d)
    cd "$ROOT"
}

teardown() {
    rm -rf "$TMP"
}

plan() {
    "$HPS_BIN/hps-plan" "$@"
}

# A jobs file in $TMP naming the testdata by absolute paths; $1: the jobs.
jobs_file() {
    cat > "$TMP/jobs.json" <<EOF
{"format": "hps-jobs", "version": 1, "cluster": "$ROOT/testdata/clusters/${CLUSTER:-aws}.json", "jobs": [$1]}
EOF
}
job() { # NAME MODEL EXTRA
    echo "{\"name\": \"$1\", \"model\": \"$ROOT/testdata/models/$2.json\", \"profiles\": [\"$ROOT/testdata/profiles/$2.json\"]$3}"
}

@test "jobs: the joint plan of three.json beats three separate plans contending for the A100s" {
    plan --jobs $THREE --objective completion -o "$TMP/joint.json"
    run python3 - "$TMP/joint.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "hps-joint-plan" and d["optimal"], d
t, s = d["totals"], d["separate"]
# measured: the weighted completion times, joint against separate
assert t["completion_s"] < 0.9 * s["completion_s"], (t, s)
assert t["makespan_s"] <= s["makespan_s"] * (1 + 1e-12), (t, s)
# no two jobs hold the same unit at once
jobs = d["jobs"]
for a in jobs:
    for b in jobs:
        if a is b or not (a["start_s"] < b["end_s"] and b["start_s"] < a["end_s"]):
            continue
        for ty, ids in a["unit_ids"].items():
            assert not set(ids) & set(b["unit_ids"].get(ty, [])), (a["name"], b["name"], ty)
# units in use never above max_units; each job's plan is an hps-plan plan
for p in d["phases"]:
    for ty, n in p["units"].items():
        assert n <= d["max_units"][ty], p
for j in jobs:
    assert j["plan"]["format"] == "hps-plan" and j["plan"]["feasible"]
    assert j["throughput"] >= j["plan"]["min_throughput"] * (1 - 1e-9)
print("ok", t["completion_s"], s["completion_s"])
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "jobs: --objective cost keeps the separate plans' cost and lets the jobs wait less" {
    plan --jobs $THREE -o "$TMP/joint.json"
    [ "$(json_field "$TMP/joint.json" 'd["totals"]["cost"] <= d["separate"]["cost"] * (1 + 1e-12)')" = True ]
    [ "$(json_field "$TMP/joint.json" 'd["totals"]["completion_s"] < d["separate"]["completion_s"]')" = True ]
    # a job that waits is listed so while another runs
    [ "$(json_field "$TMP/joint.json" 'any(p["waiting"] for p in d["phases"])')" = True ]
}

@test "jobs: greedy and exact agree on three.json; show renders the joint plan as table and svg" {
    plan --jobs $THREE --objective completion -a exact -o "$TMP/x.json"
    plan --jobs $THREE --objective completion -a greedy -o "$TMP/g.json"
    x=$(json_field "$TMP/x.json" 'd["totals"]["completion_s"]')
    g=$(json_field "$TMP/g.json" 'd["totals"]["completion_s"]')
    python3 -c "import sys; x, g = map(float, sys.argv[1:]); assert g <= x * 1.01, (x, g)" "$x" "$g"
    run plan show "$TMP/x.json" -f table
    [ "$status" -eq 0 ]
    [[ "$output" == *"joint plan of 3 jobs, objective completion"* ]]
    [[ "$output" == *"separate"* ]]
    [[ "$output" == *"gpu-a100 x"* ]]
    plan show "$TMP/x.json" -f svg -o "$TMP/x.svg"
    python3 -c "import xml.dom.minidom, sys; xml.dom.minidom.parse(sys.argv[1])" "$TMP/x.svg"
    grep -q "units in use" "$TMP/x.svg"
    run plan show "$TMP/x.json" -f dot
    [ "$status" -eq 2 ]
}

@test "jobs: on a cluster with nodes, each job's ranks get cores no other running job holds" {
    # aws.json with nodes: the three jobs' workers and big-ctr's 11 servers
    python3 - "$ROOT/testdata/clusters/aws.json" "$TMP/nodes.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["nodes"] = [{"name": "p4d", "units": {"gpu-a100": 8, "cpu-r5": 4}},
              {"name": "g4dn", "units": {"gpu-t4": 16, "cpu-r5": 60, "cpu-c5": 32}}]
json.dump(c, open(sys.argv[2], "w"))
PY
    sed "s|../clusters/aws.json|$TMP/nodes.json|; s|\.\./|$ROOT/testdata/|g" $THREE > "$TMP/jobs.json"
    plan --jobs "$TMP/jobs.json" --objective completion --rankfile "$TMP/rf" -o "$TMP/joint.json"
    [ -s "$TMP/rf.ctr" ] && [ -s "$TMP/rf.dlrm" ] && [ -s "$TMP/rf.big" ]
    run python3 - "$TMP/joint.json" "$TMP/rf" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def cores(name):
    out = set()
    for line in open(sys.argv[2] + "." + name):
        host, slot = line.split("=", 1)[1].split(" slot=")
        a, _, b = slot.strip().partition("-")
        out |= {(host, k) for k in range(int(a), int(b or a) + 1)}
    return out
jobs = d["jobs"]
servers = sum(j["plan"]["servers"]["count"] for j in jobs)
assert servers > 0, "no servers placed"
for j in jobs:
    ranks = len(open(sys.argv[2] + "." + j["name"]).readlines())
    assert ranks == len(j["plan"]["workers"]) + j["plan"]["servers"]["count"], j["name"]
for a in jobs:
    for b in jobs:
        if a is not b and a["start_s"] < b["end_s"] and b["start_s"] < a["end_s"]:
            assert not cores(a["name"]) & cores(b["name"]), (a["name"], b["name"])
print("ok", servers)
PY
    echo "$output"
    [ "$status" -eq 0 ]
    # aws.json lists no nodes
    run plan --jobs $THREE --rankfile "$TMP/rf2"
    [ "$status" -eq 2 ]
    [[ "$output" == *"lists no nodes"* ]]
}

@test "jobs: a deadline the separate plans miss is met by the joint plan" {
    jobs_file "$(job a demo-ctr ', "samples": 4e9, "min_throughput": 1000000'), $(job b big-ctr ', "samples": 2e9, "min_throughput": 1300000, "deadline_hours": 1')"
    plan --jobs "$TMP/jobs.json" -o "$TMP/joint.json"
    [ "$(json_field "$TMP/joint.json" 'd["separate"]["feasible"]')" = False ]
    [ "$(json_field "$TMP/joint.json" 'd["totals"]["feasible"] and d["jobs"][1]["end_s"] <= 3600')" = True ]
}

@test "jobs: a deadline no plan meets, and a budget below every plan, fail with status 1" {
    jobs_file "$(job a demo-ctr ', "samples": 1e12, "deadline_hours": 1')"
    run plan --jobs "$TMP/jobs.json"
    [ "$status" -eq 1 ]
    [[ "$output" == *"job 'a': no plan meets"* ]]
    echo "{\"format\": \"hps-jobs\", \"version\": 1, \"cluster\": \"$ROOT/testdata/clusters/aws.json\", \"budget\": 0.001, \"jobs\": [$(job a demo-ctr ', "min_throughput": 100000')]}" > "$TMP/b.json"
    run plan --jobs "$TMP/b.json" -o "$TMP/out.json"
    [ "$status" -eq 1 ]
    [[ "$output" == *"budget"* ]]
    [ ! -e "$TMP/out.json" ]
}

@test "jobs: bad jobs files and options say what is wrong, status 2" {
    jobs_file "$(job a demo-ctr '')"
    run plan --jobs "$TMP/jobs.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"jobs.json: job 'a': needs min_throughput (samples/s) or deadline_hours"* ]]
    jobs_file "$(job a demo-ctr ', "min_throughput": 1, "weight": -1')"
    run plan --jobs "$TMP/jobs.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"job 'a': weight"* ]]
    jobs_file "$(job a no-such ', "min_throughput": 1')"
    run plan --jobs "$TMP/jobs.json"
    [ "$status" -eq 2 ]
    [[ "$output" == *"no-such.json"* ]]
    run plan --jobs $THREE --objective edp
    [ "$status" -eq 2 ]
    [[ "$output" == *"--objective"* ]]
    run plan --jobs $THREE -a rl2
    [ "$status" -eq 2 ]
    run plan --jobs $THREE -m testdata/models/tiny.json
    [ "$status" -eq 2 ]
    [[ "$output" == *"the jobs file names"* ]]
    [ "${#lines[@]}" -le 2 ]
}
