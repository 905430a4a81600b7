#!/usr/bin/env python3
"""Adds to each fixture of testdata/profiles with a measured "cpu" device the
CPU instances of testdata/clusters (cpu-c5, cpu-r5, cpu-n2), estimated from
it by hps-profile's CPU device model (hps-profile(1), ESTIMATES) from their
spec sheets in testdata/devices.  Devices of those names already there are
replaced; everything else in the file stays as it is.  Run from the
repository root after `make`:
    python3 testdata/profiles/add-cpu-estimates.py [BIN_DIR]
"""
import json
import subprocess
import sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "bin"
SHEETS = ["testdata/devices/cpu-c5.json", "testdata/devices/cpu-r5.json", "testdata/devices/cpu-n2.json"]
FIXTURES = ["tiny", "demo-ctr-cpu", "demo-ctr", "dlrm-criteo", "big-ctr"]

for name in FIXTURES:
    path = "testdata/profiles/%s.json" % name
    doc = json.load(open(path))
    ids = [json.load(open(s))["name"] for s in SHEETS]
    doc["devices"] = [d for d in doc["devices"] if d["id"] not in ids]
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    args = [BIN + "/hps-profile", "show", path]
    for s in SHEETS:
        args += ["--estimate", s]
    out = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    doc["devices"] += [d for d in out["devices"] if d["id"] in ids]
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
