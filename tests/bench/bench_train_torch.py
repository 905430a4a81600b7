#!/usr/bin/env python3
"""The PyTorch side of make bench-train: the demo CTR model (EmbeddingBag +
Linear), Adagrad for the embeddings and Adam for the dense layers, on the very
rows hps-train trained on (decoded by `hps-shard cat`), tensors preloaded.

usage: bench_train_torch.py MODEL.json TRAIN.tsv HOLDOUT.tsv THREADS
prints one JSON line: samples_per_s, logloss (held out), seconds."""
import json
import sys
import time

import numpy as np
import torch


def load(path, vocab):
    """Label, dense floats, and per-slot keys mapped to row ids (new keys get new rows)."""
    labels, dense, rows, lengths = [], [], [], []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        labels.append(float(f[0]))
        dense.append([float(x) for x in f[1:14]])
        for s, key in enumerate(f[14:40]):
            if key:
                rows.append(vocab.setdefault((s, key), len(vocab)))
                lengths.append(1)
            else:
                lengths.append(0)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return (torch.tensor(labels), torch.tensor(dense), torch.tensor(rows, dtype=torch.int64),
            torch.tensor(offsets, dtype=torch.int64), np.array(lengths))


class CTR(torch.nn.Module):
    def __init__(self, rows, dim, widths):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
        torch.nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        layers, width = [], 26 * dim + 13
        for w in widths:
            layers += [torch.nn.Linear(width, w), torch.nn.ReLU()]
            width = w
        layers.append(torch.nn.Linear(width, 1))
        self.mlp = torch.nn.Sequential(*layers)
        self.dim = dim

    def forward(self, dense, rows, offsets, batch):
        pooled = self.emb(rows, offsets).view(batch, 26 * self.dim)
        return self.mlp(torch.cat([pooled, dense], dim=1)).squeeze(1)


def batches(data, lengths, batch):
    labels, dense, rows, offsets = data
    n = len(labels)
    per_sample = lengths.reshape(n, 26).sum(axis=1)
    starts = np.concatenate([[0], np.cumsum(per_sample)])
    for i in range(0, n, batch):
        j = min(i + batch, n)
        lo, hi = starts[i], starts[j]
        yield (labels[i:j], dense[i:j], rows[lo:hi], offsets[i * 26:j * 26] - lo, j - i)


def main():
    model_path, train_path, holdout_path, threads = sys.argv[1:5]
    torch.set_num_threads(int(threads))
    torch.manual_seed(1)
    spec = json.load(open(model_path))
    dim = next(l["dim"] for l in spec["layers"] if l["type"] == "embedding")
    widths = [l["out"] for l in spec["layers"] if l["type"] == "fc"][:-1]
    batch = spec["batch"]
    vocab = {}
    *train, train_len = load(train_path, vocab)
    *hold, hold_len = load(holdout_path, vocab)
    net = CTR(len(vocab), dim, widths)
    sparse = torch.optim.Adagrad(net.emb.parameters(), lr=0.05)
    dense_opt = torch.optim.Adam(net.mlp.parameters(), lr=1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    todo = list(batches(train, train_len, batch))
    start = time.perf_counter()
    for y, x, rows, offsets, b in todo:
        sparse.zero_grad()
        dense_opt.zero_grad()
        loss = loss_fn(net(x, rows, offsets, b), y)
        loss.backward()
        sparse.step()
        dense_opt.step()
    seconds = time.perf_counter() - start
    total, n = 0.0, 0
    with torch.no_grad():
        for y, x, rows, offsets, b in batches(hold, hold_len, batch):
            total += torch.nn.functional.binary_cross_entropy_with_logits(
                net(x, rows, offsets, b), y, reduction="sum").item()
            n += b
    print(json.dumps({"samples_per_s": len(train[0]) / seconds, "logloss": total / n,
                      "seconds": seconds, "threads": torch.get_num_threads(),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
