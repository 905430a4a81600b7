#!/usr/bin/env python3
"""The PyTorch side of make bench-train: the model of an hps model file built
from torch layers (EmbeddingBag for the embedding layers, Linear + activation
for fc, concat or DLRM's pairwise dots for the merge, BCE or cross-entropy),
AdaGrad for the embeddings and Adam for the dense layers, trained on the very
rows hps-train trained on (decoded by `hps-shard cat --as tsv`), tensors
preloaded.  Keys first seen in the held-out rows read zeros, as in hps-train's
evaluation.

usage: bench_train_torch.py MODEL.json TRAIN.tsv HOLDOUT.tsv THREADS [SEED [EPOCHS]]
prints one JSON line: samples_per_s, logloss and accuracy (held out), seconds.
EPOCHS passes over the rows (1), as hps-train's --epochs: bench-train sets
both so that a run lasts long enough to be stable."""
import json
import sys
import time

import numpy as np
import torch

ACT = {"relu": torch.nn.ReLU, "sigmoid": torch.nn.Sigmoid, "tanh": torch.nn.Tanh}


def load(path, n_dense, n_slots, vocab):
    """Labels, dense floats, and per-slot keys mapped to row ids (new keys get new rows)."""
    labels, dense, rows, lengths = [], [], [], []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        labels.append(float(f[0]))
        dense.append(np.array(f[1:1 + n_dense], dtype=np.float32))
        for s, key in enumerate(f[1 + n_dense:1 + n_dense + n_slots]):
            if key:
                rows.append(vocab.setdefault((s, key), len(vocab)))
                lengths.append(1)
            else:
                lengths.append(0)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if lengths else np.zeros(0)
    dense = np.stack(dense) if n_dense else np.zeros((len(labels), 0), dtype=np.float32)
    return (torch.tensor(labels), torch.from_numpy(dense), torch.tensor(rows, dtype=torch.int64),
            torch.tensor(offsets, dtype=torch.int64), np.array(lengths, dtype=np.int64))


def mlp(specs, width):
    layers = []
    for spec in specs:
        layers.append(torch.nn.Linear(width, spec["out"]))
        if spec.get("activation", "none") != "none":
            layers.append(ACT[spec["activation"]]())
        width = spec["out"]
    return torch.nn.Sequential(*layers), width


class Net(torch.nn.Module):
    """The layers of an hps model: embeddings, fc on the dense features
    (bottom), the merge, fc after it (top)."""

    def __init__(self, spec, rows):
        super().__init__()
        kinds = [l["type"] for l in spec["layers"]]
        merge = next(i for i, k in enumerate(kinds) if k in ("concat", "dot_interaction"))
        self.dot = kinds[merge] == "dot_interaction"
        self.n_slots = len(spec["input"]["slots"])
        emb = [l for l in spec["layers"] if l["type"] == "embedding"]
        self.dim = emb[0]["dim"] if emb else 0
        self.emb = torch.nn.EmbeddingBag(rows, self.dim, mode="sum", sparse=True) if emb else None
        if self.emb is not None:
            torch.nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        self.bottom, dense = mlp([l for l in spec["layers"][:merge] if l["type"] == "fc"],
                                 spec["input"]["dense"])
        if self.dot:
            n = self.n_slots + (1 if dense else 0)
            self.pairs = torch.tril_indices(n, n, offset=-1)
            width = dense + n * (n - 1) // 2
        else:
            width = self.n_slots * self.dim + dense
        self.top, _ = mlp([l for l in spec["layers"][merge:] if l["type"] == "fc"], width)

    def forward(self, dense, rows, offsets, batch):
        x = self.bottom(dense)
        if self.emb is None:
            return self.top(x)
        pooled = self.emb(rows, offsets).view(batch, self.n_slots, self.dim)
        if self.dot:
            t = torch.cat([x.unsqueeze(1), pooled], dim=1) if x.shape[1] else pooled
            z = torch.bmm(t, t.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
            return self.top(torch.cat([x, z], dim=1))
        return self.top(torch.cat([pooled.view(batch, -1), x], dim=1))


def batches(data, lengths, n_slots, batch):
    labels, dense, rows, offsets = data
    n = len(labels)
    per_sample = lengths.reshape(n, n_slots).sum(axis=1) if n_slots else np.zeros(n, np.int64)
    starts = np.concatenate([[0], np.cumsum(per_sample)])
    for i in range(0, n, batch):
        j = min(i + batch, n)
        lo, hi = starts[i], starts[j]
        yield (labels[i:j], dense[i:j], rows[lo:hi], offsets[i * n_slots:j * n_slots] - lo, j - i)


def main():
    model_path, train_path, holdout_path, threads = sys.argv[1:5]
    torch.set_num_threads(int(threads))
    torch.manual_seed(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    epochs = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    spec = json.load(open(model_path))
    n_dense, n_slots = spec["input"]["dense"], len(spec["input"]["slots"])
    softmax = spec["input"]["label"]["kind"] == "multiclass"
    batch = spec["batch"]
    vocab = {}
    *train, train_len = load(train_path, n_dense, n_slots, vocab)
    trained = len(vocab)
    *hold, hold_len = load(holdout_path, n_dense, n_slots, vocab)
    net = Net(spec, max(len(vocab), 1))
    if net.emb is not None:
        with torch.no_grad():
            net.emb.weight[trained:] = 0
    sparse = torch.optim.Adagrad(net.emb.parameters(), lr=0.05) if net.emb is not None else None
    dense_params = [p for name, p in net.named_parameters() if not name.startswith("emb.")]
    dense_opt = torch.optim.Adam(dense_params, lr=1e-3)
    if softmax:
        loss_fn = lambda out, y: torch.nn.functional.cross_entropy(out, y.long())
    else:
        loss_fn = lambda out, y: torch.nn.functional.binary_cross_entropy_with_logits(out.squeeze(1), y)
    todo = list(batches(train, train_len, n_slots, batch))
    start = time.perf_counter()
    for y, x, rows, offsets, b in todo * epochs:
        if sparse:
            sparse.zero_grad()
        dense_opt.zero_grad()
        loss = loss_fn(net(x, rows, offsets, b), y)
        loss.backward()
        if sparse:
            sparse.step()
        dense_opt.step()
    seconds = time.perf_counter() - start
    total, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for y, x, rows, offsets, b in batches(hold, hold_len, n_slots, batch):
            out = net(x, rows, offsets, b)
            total += loss_fn(out, y).item() * b
            pred = out.argmax(1) if softmax else (out.squeeze(1) > 0).float()
            correct += int((pred == (y.long() if softmax else y)).sum())
            n += b
    print(json.dumps({"samples_per_s": epochs * len(train[0]) / seconds, "logloss": total / n,
                      "accuracy": correct / n, "seconds": seconds,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
