#!/usr/bin/env python3
"""Writes a seeded MNIST-shaped libsvm set for the benchmarks: 784 features in
[0, 1], about a fifth of them non-zero as in MNIST's pixels, 10 classes, each
class a noisy copy of its own random prototype, so that an MLP learns it to a
high but imperfect accuracy.  usage: make_dense_libsvm.py ROWS SEED > out.svm"""
import sys

import numpy as np

FEATURES, CLASSES, CHUNK = 784, 10, 4096


def main():
    rows, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(seed)
    protos = rng.random((CLASSES, FEATURES)) * (rng.random((CLASSES, FEATURES)) < 0.2)
    names = np.array([f"{i + 1}:" for i in range(FEATURES)])
    out = sys.stdout
    for lo in range(0, rows, CHUNK):
        n = min(CHUNK, rows - lo)
        labels = rng.integers(0, CLASSES, n)
        x = protos[labels] + rng.normal(0, 0.35, (n, FEATURES))
        x[rng.random((n, FEATURES)) < 0.75] = 0  # MNIST is mostly background
        x = np.clip(np.round(x, 3), 0, 1)
        for c, row in zip(labels, x):
            nz = np.flatnonzero(row)
            vals = np.char.mod("%g", row[nz])
            out.write(f"{c} " + " ".join(np.char.add(names[nz], vals)) + "\n")


if __name__ == "__main__":
    main()
