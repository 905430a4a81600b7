#!/usr/bin/env python3
"""The PyTorch side of make bench-train, and the check that hps computes what
PyTorch computes.  The model is built from the hps model file itself
(hps-model(5), version 1 chains and version 2 graphs alike): a table per
embedding or linear layer, Linear + activation for fc, concat, DLRM's
pairwise dots, the FM term, DCN/DCN-v2 cross layers, add, dropout, BCE or
cross-entropy; a layer without "inputs" reads what hps-model(5) says a chain
reads.

Train (make bench-train): AdaGrad for the tables and Adam for the dense
layers, on the very rows hps-train trained on (decoded by `hps-shard cat --as
tsv`), tensors preloaded.  Keys first seen in the held-out rows read zeros, as
in hps-train's evaluation.

  bench_train_torch.py MODEL.json TRAIN.tsv HOLDOUT.tsv THREADS [SEED [EPOCHS]]
  prints one JSON line: samples_per_s, logloss, AUC (a binary label; else
  null) and accuracy (held out, after the last epoch), seconds, and "epochs":
  the held-out logloss, AUC and accuracy after each epoch (as hps-train
  --eval's eval records; not timed).
  EPOCHS passes over the rows (1), as hps-train's --epochs: bench-train sets
  both so that a run lasts long enough to be stable.

Replay (tests/cli/graph.bats): training from hps's initial weights, so that
the two trainers' runs can be compared step for step rather than seed against
seed.  INIT is hps-train's export after an epoch at rates 1e-12 (every key's
first row, the dense layers' initial weights); the same batches in the same
order follow, with the optimizers above.

  bench_train_torch.py --replay MODEL.json TRAIN.tsv HOLDOUT.tsv INIT EPOCHS [MODEL.json ...]
  prints one JSON line a model: "epochs", the held-out quality after each epoch.

Check (tests/cli/graph.bats): one batch forward and backward against hps-train's
first step.  W0 is hps-train's export after a step that changed nothing (every
rate 1e-12), LOSS that step's loss, W1 its export after the same step by SGD
at rate ETA, so that (W0 - W1) / ETA is hps's gradient of each dense
parameter.  CKPT is the checkpoint directory of the W1 run: the tables'
AdaGrad accumulators after one step from zero are each gradient squared, and
the step moved each weight against its gradient's sign, so every table row's
gradient is compared too.  Dropout draws hps's masks (the same hash of the
run's SEED).

  bench_train_torch.py --check MODEL.json BATCH.tsv W0 W1 ETA LOSS SEED CKPT [MODEL.json ...]
  prints one JSON line a model; exits 1, naming the model and the tensor, when
  a value differs by more than 1e-5 relative.

Both take several models, a group of arguments each, so that one process (one
import of torch, seconds) serves all the models of a test."""
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import torch

ACT = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
       "none": lambda x: x}
TABLES = ("embedding", "linear")


def resolve(spec):
    """Each layer's input names, by its "inputs" or by a chain's rules:
    before the merge, fc and dropout read the dense stream and concat or
    dot_interaction every embedding layer and the dense stream; otherwise a
    layer reads the previous one.  Also each table layer's slot indices."""
    slots = [s["name"] for s in spec["input"]["slots"]]
    n_dense = spec["input"].get("dense", 0)
    merged, dense_prod, taken = False, "dense" if n_dense else None, set()
    out = []
    for i, L in enumerate(spec["layers"]):
        kind = L["type"]
        want = L.get("slots", "all")
        if kind in TABLES:
            names = [s for s in slots if kind == "linear" or s not in taken] if want == "all" else want
            L = dict(L, _slots=[slots.index(s) for s in names])
            if kind == "embedding":
                taken.update(names)
            out.append(L)
            continue
        if "inputs" in L:
            ins = L["inputs"]
        elif not merged and kind in ("fc", "dropout"):
            ins = [dense_prod]
        elif not merged and kind in ("concat", "dot_interaction"):
            ins = [l["name"] for l in out if l["type"] == "embedding"] + ([dense_prod] if dense_prod else [])
        else:
            ins = [out[i - 1]["name"]]
        if not merged and "inputs" not in L and kind in ("fc", "dropout"):
            dense_prod = L["name"]
        if "inputs" in L or kind in ("concat", "dot_interaction"):
            merged = True
        out.append(dict(L, _inputs=ins))
    return out


def mix64(x):
    """hps_mix64 (splitmix64's finaliser) on uint64 arrays."""
    with np.errstate(over="ignore"):
        x = (np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def dropout_mask(seed, step, micro, layer, shape, rate):
    """hps's mask (kernels_ctr.c dropout_keep, train_run.c's seed)."""
    with np.errstate(over="ignore"):
        s = mix64(np.uint64(seed) ^ mix64(np.uint64(step * 4096 + micro)))
        s = s ^ (np.uint64(0x9E3779B97F4A7C15) * np.uint64(layer + 1))
        i = np.arange(int(np.prod(shape)), dtype=np.uint64)
        z = s + np.uint64(0x9E3779B97F4A7C15) * (i + np.uint64(1))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    keep = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 >= np.float32(rate)
    return torch.from_numpy(keep.reshape(shape)).float() * np.float32(1.0 / np.float32(1.0 - np.float32(rate)))


class Graph(torch.nn.Module):
    """The layers of an hps model; rows[name] is [B, slots] of row indices
    into that table layer's weight (0: the zero row of a missing key)."""

    def __init__(self, spec, table_rows):
        super().__init__()
        self.layers = resolve(spec)
        self.n_dense = spec["input"].get("dense", 0)
        self.tables = torch.nn.ModuleDict()
        self.dense = torch.nn.ParameterDict()
        self.dropout = None  # (seed, step) when hps's masks are drawn
        width = {"dense": self.n_dense}
        for L in self.layers:
            name, kind = L["name"], L["type"]
            w = [width[i] for i in L.get("_inputs", [])]
            if kind in TABLES:
                dim = L.get("dim", 1) if kind == "embedding" else 1
                t = torch.nn.Embedding(table_rows[name] + 1, dim, padding_idx=0, sparse=True)
                torch.nn.init.uniform_(t.weight, -0.05, 0.05)
                with torch.no_grad():
                    t.weight[0] = 0
                self.tables[name] = t
                width[name] = len(L["_slots"]) * dim if kind == "embedding" else 1
                if kind == "linear":
                    n = self.n_dense if L.get("dense") else 0
                    self.param(f"{name}.bias", torch.zeros(1))
                    if n:
                        self.param(f"{name}.dense.weight", torch.empty(1, n).uniform_(-n ** -0.5, n ** -0.5))
            elif kind == "fc":
                lin = torch.nn.Linear(w[0], L["out"])
                self.param(f"{name}.weight", lin.weight.data)
                self.param(f"{name}.bias", lin.bias.data)
                width[name] = L["out"]
            elif kind == "cross":
                # as TorchRec's CrossNet, VectorCrossNet and LowRankCrossNet:
                # kernels xavier_normal_ (w as a [x, 1] kernel), biases zero
                x, r = w[0], L.get("rank", 0)
                xavier = lambda *shape: torch.nn.init.xavier_normal_(torch.empty(*shape))
                for i in range(L["depth"]):
                    if L["kind"] == "vector":
                        self.param(f"{name}.{i}.weight", xavier(x, 1).squeeze(1))
                    elif r:
                        self.param(f"{name}.{i}.u", xavier(x, r))
                        self.param(f"{name}.{i}.v", xavier(r, x))
                    else:
                        self.param(f"{name}.{i}.weight", xavier(x, x))
                    self.param(f"{name}.{i}.bias", torch.zeros(x))
                width[name] = x
            elif kind in ("concat",):
                width[name] = sum(w)
            elif kind == "dot_interaction":
                dims = [l.get("dim") for l in self.layers if l["name"] in L["_inputs"] and l["type"] == "embedding"]
                n = sum(len(l["_slots"]) for l in self.layers if l["name"] in L["_inputs"] and l["type"] == "embedding")
                other = sum(width[i] for i in L["_inputs"] if not self.is_emb(i))
                n += 1 if other else 0
                L["_pairs"] = torch.tril_indices(n, n, offset=-1)
                L["_dim"] = dims[0]
                width[name] = other + n * (n - 1) // 2
            elif kind == "fm":
                width[name] = next(l["dim"] for l in self.layers if l["name"] == L["_inputs"][0]) if L.get("vector") else 1
            else:  # add, dropout, loss
                width[name] = w[0]

    def param(self, name, value):
        self.dense[name.replace(".", "__")] = torch.nn.Parameter(value.clone().float())

    def p(self, name):
        return self.dense[name.replace(".", "__")]

    def is_emb(self, name):
        return any(l["name"] == name and l["type"] == "embedding" for l in self.layers)

    def forward(self, dense, rows):
        """The logits (the loss layer's input)."""
        t = {"dense": dense}
        B = dense.shape[0]
        for li, L in enumerate(self.layers):
            name, kind = L["name"], L["type"]
            x = [t[i] for i in L.get("_inputs", [])]
            if kind == "embedding":
                pooled = self.tables[name](rows[name])  # [B, S, dim]
                t[name] = pooled.reshape(B, -1)
            elif kind == "linear":
                z = self.tables[name](rows[name]).sum(dim=(1, 2)).unsqueeze(1) + self.p(f"{name}.bias")
                if L.get("dense"):
                    z = z + dense @ self.p(f"{name}.dense.weight").t()
                t[name] = z
            elif kind == "fc":
                t[name] = ACT[L.get("activation", "none")](x[0] @ self.p(f"{name}.weight").t() + self.p(f"{name}.bias"))
            elif kind == "concat":
                t[name] = torch.cat(x, dim=1)
            elif kind == "dot_interaction":
                vecs = [t[i].reshape(B, -1, L["_dim"]) for i in L["_inputs"] if self.is_emb(i)]
                other = [t[i] for i in L["_inputs"] if not self.is_emb(i)]
                v = torch.cat([o.unsqueeze(1) for o in other] + vecs, dim=1)
                z = torch.bmm(v, v.transpose(1, 2))[:, L["_pairs"][0], L["_pairs"][1]]
                t[name] = torch.cat(other + [z], dim=1)
            elif kind == "fm":
                dim = next(l["dim"] for l in self.layers if l["name"] == L["_inputs"][0])
                v = x[0].reshape(B, -1, dim)
                o = 0.5 * (v.sum(1) ** 2 - (v * v).sum(1))
                t[name] = o if L.get("vector") else o.sum(1, keepdim=True)
            elif kind == "cross":
                x0 = xl = x[0]
                for i in range(L["depth"]):
                    b = self.p(f"{name}.{i}.bias")
                    if L["kind"] == "vector":
                        xl = x0 * (xl @ self.p(f"{name}.{i}.weight")).unsqueeze(1) + b + xl
                    else:
                        if L.get("rank"):
                            z = (xl @ self.p(f"{name}.{i}.v").t()) @ self.p(f"{name}.{i}.u").t() + b
                        else:
                            z = xl @ self.p(f"{name}.{i}.weight").t() + b
                        xl = x0 * z + xl
                t[name] = xl
            elif kind == "add":
                t[name] = sum(x)
            elif kind == "dropout":
                if self.training and self.dropout is not None:
                    seed, step = self.dropout
                    x = [x[0] * dropout_mask(seed, step, 0, li, tuple(x[0].shape), L["rate"])]
                elif self.training:
                    x = [torch.nn.functional.dropout(x[0], L["rate"])]
                t[name] = x[0]
            elif kind == "loss":
                return x[0]
        raise ValueError("the model has no loss layer")


def read_tsv(path, n_dense, n_slots):
    """Labels, dense floats, and each row's key string per slot ("" when absent)."""
    labels, dense, keys = [], [], []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        labels.append(float(f[0]))
        dense.append(np.array(f[1:1 + n_dense], dtype=np.float32))
        keys.append(f[1 + n_dense:1 + n_dense + n_slots])
    dense = np.stack(dense) if n_dense else np.zeros((len(labels), 0), dtype=np.float32)
    return torch.tensor(labels), torch.from_numpy(dense), keys


def row_ids(layers, keys, vocab, grow):
    """Per table layer, [rows, slots] of indices (0 for a missing or unknown key)."""
    out = {}
    for L in layers:
        if L["type"] not in TABLES:
            continue
        v = vocab.setdefault(L["name"], {})
        ids = np.zeros((len(keys), len(L["_slots"])), dtype=np.int64)
        for r, row in enumerate(keys):
            for j, s in enumerate(L["_slots"]):
                k = row[s]
                if k and (grow or (s, k) in v):
                    ids[r, j] = v.setdefault((s, k), len(v) + 1)
        out[L["name"]] = torch.from_numpy(ids)
    return out


def loss_fn(spec):
    if spec["input"]["label"]["kind"] == "multiclass":
        return lambda out, y: torch.nn.functional.cross_entropy(out, y.long())
    return lambda out, y: torch.nn.functional.binary_cross_entropy_with_logits(out.squeeze(1), y)


def auc(score, label):
    """Held-out AUC as hps-train's eval computes it: the rank sum of the
    positives (Mann-Whitney), tied scores sharing their mean rank; NaN without
    both classes or with a NaN score."""
    score, pos = np.asarray(score, dtype=np.float64), np.asarray(label) > 0.5
    n_pos, n_neg = int(pos.sum()), len(pos) - int(pos.sum())
    if not n_pos or not n_neg or np.isnan(score).any():
        return float("nan")
    order = np.argsort(score, kind="stable")
    _, first, count = np.unique(score[order], return_index=True, return_counts=True)
    ranks = np.empty(len(score))
    ranks[order] = np.repeat(first + (count + 1) / 2.0, count)  # ranks first+1 .. first+count
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def optimizers(net):
    """hps-train's: AdaGrad for the tables (eps as hps's), Adam for the dense layers."""
    sparse = torch.optim.Adagrad(net.tables.parameters(), lr=0.05, eps=1e-8) if len(net.tables) else None
    return sparse, torch.optim.Adam(net.dense.parameters(), lr=1e-3)


def train_epoch(net, opts, lf, x, rows, y, batch):
    """One pass over the rows in order, a batch a step (the last one short)."""
    net.train()
    for i in range(0, len(y), batch):
        j = min(i + batch, len(y))
        for o in opts:
            if o:
                o.zero_grad()
        lf(net(x[i:j], {k: v[i:j] for k, v in rows.items()}), y[i:j]).backward()
        for o in opts:
            if o:
                o.step()


def evaluate(net, lf, x, rows, y, softmax):
    """Held-out logloss, AUC (a binary label; else None) and accuracy."""
    net.eval()
    with torch.no_grad():
        out = net(x, rows)
        total = lf(out, y).item()
        pred = out.argmax(1) if softmax else (out.squeeze(1) > 0).float()
        correct = int((pred == (y.long() if softmax else y)).sum())
    area = None if softmax else auc(out.squeeze(1).numpy(), y.numpy())
    return {"logloss": total, "auc": area, "accuracy": correct / len(y)}


def train(argv):
    model_path, train_path, holdout_path, threads = argv[:4]
    torch.set_num_threads(int(threads))
    torch.manual_seed(int(argv[4]) if len(argv) > 4 else 1)
    epochs = int(argv[5]) if len(argv) > 5 else 1
    spec = json.load(open(model_path))
    n_dense, n_slots = spec["input"].get("dense", 0), len(spec["input"]["slots"])
    softmax = spec["input"]["label"]["kind"] == "multiclass"
    batch, layers, vocab = spec["batch"], resolve(spec), {}
    y_tr, x_tr, k_tr = read_tsv(train_path, n_dense, n_slots)
    rows_tr = row_ids(layers, k_tr, vocab, True)
    y_ho, x_ho, k_ho = read_tsv(holdout_path, n_dense, n_slots)
    rows_ho = row_ids(layers, k_ho, vocab, False)  # unseen keys read the zero row
    net = Graph(spec, {name: len(v) for name, v in vocab.items()})
    opts, lf = optimizers(net), loss_fn(spec)
    seconds, evals = 0.0, []
    for _ in range(epochs):
        start = time.perf_counter()
        train_epoch(net, opts, lf, x_tr, rows_tr, y_tr, batch)
        seconds += time.perf_counter() - start
        # as hps-train --eval: after each epoch (not timed)
        evals.append(evaluate(net, lf, x_ho, rows_ho, y_ho, softmax))
    print(json.dumps(dict(evals[-1], samples_per_s=epochs * len(y_tr) / seconds, seconds=seconds,
                          epochs=evals, threads=torch.get_num_threads(), torch=torch.__version__)))


def replay(argv):
    """Trains from hps's initial weights on the same batches in the same order;
    prints the held-out quality after each epoch."""
    model_path, train_path, holdout_path, init_path, epochs = argv
    torch.set_num_threads(1)
    spec = json.load(open(model_path))
    n_dense, n_slots = spec["input"].get("dense", 0), len(spec["input"]["slots"])
    layers = resolve(spec)
    net, vocab = hps_net(spec, layers, read_safetensors(init_path))
    y_tr, x_tr, k_tr = read_tsv(train_path, n_dense, n_slots)
    y_ho, x_ho, k_ho = read_tsv(holdout_path, n_dense, n_slots)
    rows_tr, rows_ho = row_ids(layers, k_tr, vocab, False), row_ids(layers, k_ho, vocab, False)
    opts, lf = optimizers(net), loss_fn(spec)
    softmax = spec["input"]["label"]["kind"] == "multiclass"
    evals = []
    for _ in range(int(epochs)):
        train_epoch(net, opts, lf, x_tr, rows_tr, y_tr, spec["batch"])
        evals.append(evaluate(net, lf, x_ho, rows_ho, y_ho, softmax))
    print(json.dumps({"model": spec["name"], "epochs": evals}))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64}[t["dtype"]]
        out[name] = np.frombuffer(data[lo:hi], dtype=dt).reshape(t["shape"])
    return out


def hps_net(spec, layers, w):
    """A Graph holding hps's exported weights w, and the tables' vocabularies:
    each slot's keys as `hps-shard cat` prints them, row 0 the missing key's."""
    slot_names = [s["name"] for s in spec["input"]["slots"]]
    vocab, weights = {}, {}
    for L in layers:
        if L["type"] not in TABLES:
            continue
        v, rows = {}, [np.zeros(L.get("dim", 1) if L["type"] == "embedding" else 1, np.float32)]
        for s in L["_slots"]:
            name = f"{L['name']}.{slot_names[s]}"
            for k, row in zip(w[name + ".keys"], w[name + ".weight"]):
                v[(s, format(int(k) & (2 ** 64 - 1), "x"))] = len(rows)
                rows.append(row)
        vocab[L["name"]], weights[L["name"]] = v, np.stack(rows)
    net = Graph(spec, {name: len(v) for name, v in vocab.items()})
    with torch.no_grad():
        for name, t in weights.items():
            net.tables[name].weight.copy_(torch.from_numpy(t))
        for key, p in net.dense.items():
            p.copy_(torch.from_numpy(w[key.replace("__", ".")].reshape(p.shape).copy()))
    return net, vocab


def read_checkpoint_tables(ckpt_dir, n_tables):
    """The n_tables tables of the latest checkpoint in ckpt_dir (hps-train(1),
    CHECKPOINTS), in layer order: per table {(slot, key): (weights, accum)}.
    The payload is zstd behind a 64-byte header (tests/cli/forge.py); the
    tables' layout is hps_table_save's (lib/train/train_table.c)."""
    name = open(os.path.join(ckpt_dir, "latest")).read().strip()
    raw = open(os.path.join(ckpt_dir, name), "rb").read()
    payload = subprocess.run(["zstd", "-q", "-d", "-c"], input=raw[64:], stdout=subprocess.PIPE,
                             check=True).stdout
    # magic, model and plan digests, state; "HPS2" adds the data's digest,
    # "HPS3" the day and the step it began at
    magic = struct.unpack_from("<I", payload, 0)[0]
    at = 4 + 72 + 72 + 6 * 8 + (72 if magic in (0x48505332, 0x48505333) else 0) + (16 if magic == 0x48505333 else 0)
    n_params = struct.unpack_from("<Q", payload, at)[0]
    at += 8 + 3 * 4 * n_params  # the dense parameters and Adam's moments
    tables = []
    for _ in range(n_tables):
        head, rows = struct.unpack_from("<qq", payload, at)
        at += 32  # head, rows, the eviction hand and count
        dim, layout = head & 0xFFFFFFFF, (head >> 32) & 0xFF
        rowwise, dtype = layout and (head >> 40) & 1, layout and (head >> 41) & 3
        keys = np.frombuffer(payload, np.uint64, rows, at)
        at += 8 * rows
        slots = np.frombuffer(payload, np.int32, rows, at)
        at += (4 + 8 + 1) * rows  # the slots, last steps and reference bits
        if dtype == 0:
            w = np.frombuffer(payload, np.float32, rows * dim, at).reshape(rows, dim)
            at += 4 * rows * dim
        else:  # fp16 (1) or bf16 (2) rows, widened
            h = np.frombuffer(payload, np.uint16, rows * dim, at).reshape(rows, dim)
            w = h.view(np.float16).astype(np.float32) if dtype == 1 else \
                (h.astype(np.uint32) << 16).view(np.float32)
            at += 2 * rows * dim
        acc_dim = 1 if rowwise else dim
        a = np.frombuffer(payload, np.float32, rows * acc_dim, at).reshape(rows, acc_dim)
        at += 4 * rows * acc_dim
        if layout:  # each row's day, three counters, the admission candidates
            at += 4 * rows + 3 * 8
            n_cand = struct.unpack_from("<Q", payload, at)[0]
            at += 8 + 24 * max(int(n_cand) - 1, 0)
        tables.append({(int(s), int(k)): (w[r], a[r]) for r, (s, k) in enumerate(zip(slots, keys))})
    return tables


def table_gradients(layers, slot_names, w0, ckpt_dir):
    """hps's gradient of each table layer's rows, in the order the check
    lays them out (row 0 the missing key's): AdaGrad's first step from zero
    leaves accum = g^2 and moves the weight by -lr g / (|g| + eps)."""
    out = {}
    tables = iter(read_checkpoint_tables(ckpt_dir, sum(L["type"] in TABLES for L in layers)))
    for L in layers:
        if L["type"] not in TABLES:
            continue
        t = next(tables)
        grads = [np.zeros(L.get("dim", 1) if L["type"] == "embedding" else 1)]
        for s in L["_slots"]:
            name = f"{L['name']}.{slot_names[s]}"
            for k, row in zip(w0[name + ".keys"], w0[name + ".weight"]):
                w1, acc = t[(s, int(k) & (2 ** 64 - 1))]
                grads.append(np.sign(row.astype(np.float64) - w1) * np.sqrt(acc.astype(np.float64)))
        out[L["name"]] = np.stack(grads)
    return out


def compare(name, g, g_hps):
    """A line naming the tensor when g_hps differs from g by more than 1e-5 of g's largest."""
    scale = max(np.abs(g).max(), 1e-12)
    err = np.abs(g - g_hps).max()
    if err > 1e-5 * scale:
        return f"{name}: gradients differ by {err:.3g}, {err / scale:.3g} of their largest"
    return None


def check(argv):
    model_path, batch_path, w0_path, w1_path, eta, hps_loss, seed, ckpt_dir = argv
    eta, hps_loss, seed = float(eta), float(hps_loss), int(seed)
    torch.set_num_threads(1)
    spec = json.load(open(model_path))
    n_dense, n_slots = spec["input"].get("dense", 0), len(spec["input"]["slots"])
    slot_names = [s["name"] for s in spec["input"]["slots"]]
    y, x, keys = read_tsv(batch_path, n_dense, n_slots)
    w0, w1 = read_safetensors(w0_path), read_safetensors(w1_path)
    layers = resolve(spec)
    net, vocab = hps_net(spec, layers, w0)
    rows = row_ids(layers, keys, vocab, False)
    net.train()
    net.dropout = (seed, 0)
    loss = loss_fn(spec)(net(x, rows), y)
    loss.backward()
    bad = []
    if abs(loss.item() - hps_loss) > 1e-5 * abs(loss.item()):
        bad.append(f"loss: torch {loss.item():.9g}, hps {hps_loss:.9g}")
    for key, p in net.dense.items():
        name = key.replace("__", ".")
        g_hps = (w0[name].astype(np.float64) - w1[name].astype(np.float64)).reshape(p.shape) / eta
        bad.append(compare(name, p.grad.double().numpy(), g_hps))
    for name, g_hps in table_gradients(layers, slot_names, w0, ckpt_dir).items():
        g = net.tables[name].weight.grad.to_dense().double().numpy()
        bad.append(compare(f"{name} (table)", g, g_hps))
    bad = [b for b in bad if b]
    for b in bad:
        print(f"{model_path}: {b}", file=sys.stderr)
    print(json.dumps({"model": spec["name"], "loss": loss.item(), "hps_loss": hps_loss,
                      "tensors": len(net.dense), "tables": len(net.tables), "bad": len(bad)}))
    return 1 if bad else 0


def groups(argv, n, usage):
    """argv cut into groups of n arguments, one a model."""
    if not argv or len(argv) % n:
        sys.exit(f"usage: bench_train_torch.py {usage} [...]: groups of {n} arguments")
    return [argv[i:i + n] for i in range(0, len(argv), n)]


def main():
    if sys.argv[1:2] == ["--check"]:
        bad = [check(g) for g in groups(sys.argv[2:], 8, "--check MODEL.json BATCH.tsv W0 W1 ETA LOSS SEED CKPT")]
        sys.exit(1 if any(bad) else 0)
    if sys.argv[1:2] == ["--replay"]:
        for g in groups(sys.argv[2:], 5, "--replay MODEL.json TRAIN.tsv HOLDOUT.tsv INIT EPOCHS"):
            replay(g)
        return
    train(sys.argv[1:])


if __name__ == "__main__":
    main()
