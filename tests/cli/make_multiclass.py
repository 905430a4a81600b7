#!/usr/bin/env python3
"""Writes a seeded multi-class libsvm data set with a learnable structure:
each class prefers its own block of feature indices, and feature values
carry extra evidence.  usage: make_multiclass.py ROWS CLASSES SEED > out.svm"""
import random
import sys

rows, classes, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
block = 1000 // classes
for _ in range(rows):
    c = rng.randrange(classes)
    feats = {}
    for _ in range(12):
        if rng.random() < 0.35:
            idx = 1 + c * block + rng.randrange(block)      # a class feature
        else:
            idx = 1 + rng.randrange(1000 - 1)                # noise
        feats[idx] = round(rng.uniform(0.5, 2.0), 3)
    print(c, " ".join(f"{i}:{v}" for i, v in sorted(feats.items())))
