#!/usr/bin/env python3
"""Writes the hand-made profile fixtures of testdata/profiles (hps-profile(5),
version 1) for the hps-plan tests.  The figures are not measured: they follow
a simple roofline per device (FLOP rate, gather rate, launch cost) so that the
tests have stable, plausible numbers.  Run from the repository root:
    python3 testdata/profiles/make-fixtures.py
"""
import hashlib
import json

DEVICES = {
    # id: kind, name, source, FLOP/s on fc, embedding rows/s, fixed ms per layer,
    #     parallel fraction (fc, other), overhead ms
    "cpu": ("cpu", "x86-64, 2 threads", "measured", 50e9, 40e6, 0.01, (0.95, 0.6), 0.8),
    "gpu-t4": ("gpu", "NVIDIA T4 (estimated)", "estimated", 4e12, 600e6, 0.03, (0.97, 0.9), 0.15),
    "gpu-v100": ("gpu", "NVIDIA V100 (estimated)", "estimated", 9e12, 1200e6, 0.025, (0.97, 0.9), 0.12),
    "gpu-a100": ("gpu", "NVIDIA A100 (estimated)", "estimated", 15e12, 2000e6, 0.02, (0.98, 0.9), 0.1),
}


def digest(model):
    text = json.dumps(model, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def layer_costs(model):
    """Per layer: type, flops (fwd+bwd), rows looked up, bytes in/out, params."""
    B = model["batch"]
    slots = model["input"]["slots"]
    dense = model["input"]["dense"]
    width, out = 0, []
    for L in model["layers"]:
        t = L["type"]
        c = {"name": L["name"], "type": t, "flops": 0.0, "rows": 0.0, "params": 0.0, "sparse": 0.0}
        if t == "embedding":
            keys = sum(s.get("keys_per_sample", 1) for s in slots)
            c["rows"] = B * keys
            c["flops"] = 2 * B * keys * L["dim"]
            c["sparse"] = c["rows"] * L["dim"] * 4
            c["in"], width = B * keys * 8, len(slots) * L["dim"]
        elif t == "concat":
            c["in"], width = B * width * 4, width + dense
        elif t == "fc":
            c["in"] = B * width * 4
            c["flops"] = 6.0 * B * width * L["out"]
            c["params"] = (width * L["out"] + L["out"]) * 4
            width = L["out"]
        else:  # loss
            c["in"], width = B * width * 4, 1
        c["out"] = B * width * 4
        out.append(c)
    return out


def timing(ms):
    return {"median": round(ms, 6), "min": round(ms * 0.97, 6), "max": round(ms * 1.08, 6),
            "mad": round(ms * 0.01, 6)}


def device(model, dev_id):
    kind, name, source, flops, rows, fixed, (a_fc, a_other), overhead = DEVICES[dev_id]
    layers = []
    for i, c in enumerate(layer_costs(model)):
        ms = fixed + 1e3 * (c["flops"] / flops + c["rows"] / rows + (c["in"] + c["out"]) / 20e9)
        a = a_fc if c["type"] == "fc" else a_other
        units = [1, 2] if kind == "cpu" else [1]
        scaled = [round(ms, 6)] + ([round(ms * ((1 - a) + a / 2), 6)] if kind == "cpu" else [])
        layers.append({
            "index": i, "name": c["name"], "type": c["type"],
            "forward_ms": timing(ms / 3), "backward_ms": timing(2 * ms / 3),
            "flops_forward": c["flops"] / 3, "flops_backward": 2 * c["flops"] / 3,
            "bytes_in": c["in"], "bytes_out": c["out"], "param_bytes": c["params"],
            "sparse_rows": c["rows"], "sparse_bytes": c["sparse"], "table_bytes": 0,
            "work_bytes": 2 * (c["in"] + c["out"]) + 3 * c["params"],
            "scaling": {"units": units, "ms": scaled, "parallel_fraction": a},
            "energy_j": None, "source": source})
    total = sum(l["forward_ms"]["median"] + l["backward_ms"]["median"] for l in layers)
    return {
        "id": dev_id, "kind": kind, "name": name,
        "host": "fixture" if source == "measured" else "estimated", "source": source,
        "threads": 2 if kind == "cpu" else 0, "memory_bytes": 8 << 30 if kind == "cpu" else 16 << 30,
        "sgemm_gflops": flops / 1e9, "triad_gbps": 15.0 if kind == "cpu" else 300.0,
        "gather_mrows_per_s": rows / 1e6, "layers": layers,
        "overhead_ms": timing(overhead), "step_ms": timing(total + overhead),
        "layers_sum_ms": round(total + overhead, 6),
        "energy": {"source": None, "step_j": None, "reason": "fixture"}}


def profile(model_path, dev_ids, out_path):
    model = json.load(open(model_path))
    doc = {"format": "hps-profile", "version": 1, "tool": "make-fixtures.py",
           "created": "2025-01-01T00:00:00Z",
           "model": {"name": model["name"], "digest": digest(model), "batch": model["batch"],
                     "layers": len(model["layers"])},
           "settings": {"reps": 5, "warmup": 1, "table_rows_cap": 1 << 20, "seed": 1},
           "devices": [device(model, d) for d in dev_ids]}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


profile("testdata/models/tiny.json", ["cpu", "gpu-t4"], "testdata/profiles/tiny.json")
profile("testdata/models/demo-ctr.json", ["cpu"], "testdata/profiles/demo-ctr-cpu.json")
profile("testdata/models/demo-ctr.json", ["gpu-t4", "gpu-v100", "gpu-a100"],
        "testdata/profiles/demo-ctr-gpu.json")
profile("testdata/models/demo-ctr.json", ["cpu", "gpu-t4", "gpu-v100", "gpu-a100"],
        "testdata/profiles/demo-ctr.json")
profile("testdata/models/dlrm-criteo.json", ["cpu", "gpu-t4", "gpu-v100", "gpu-a100"],
        "testdata/profiles/dlrm-criteo.json")
# 8 slots of 2^30 buckets at dim 16: 550 GB of tables (hps-plan(1), MEMORY)
profile("testdata/models/big-ctr.json", ["cpu", "gpu-t4", "gpu-v100", "gpu-a100"],
        "testdata/profiles/big-ctr.json")
