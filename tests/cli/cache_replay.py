#!/usr/bin/env python3
"""Replays a run's key stream through the cache rule of hps-train(1) ROWS and
prints what hps-train's metrics must say: lookups, hits, misses, write-backs.

usage: cache_replay.py MODEL TSV BATCH MICRO_BATCHES CAPACITY [EPOCHS]

TSV is `hps-shard cat` of the training shards (label, dense features, one
column a slot, keys in hex, several keys of a slot comma-separated), in the
order hps-train reads them.  The rule, written again from the page and not
from the C: a row is (layer, slot, key); each lookup adds one to its count
and stamps it; a step's first lookup of a row is a hit when the row is
cached, else a miss: it is cached if there is room, or if its count is
higher than the lowest (count, stamp) of the cached rows the step has not
used, which is evicted (a write-back); otherwise it is staged and written
back at the step's end.  Later lookups in the step hit unless the row is
staged.
"""
import heapq
import json
import sys


def layers_of(model):
    names = [s["name"] for s in model["input"]["slots"]]
    out = []
    for layer in model["layers"]:
        if layer.get("type") in ("embedding", "linear"):  # the layers with a table
            slots = layer.get("slots") or names
            out.append([names.index(s) for s in slots])
    return out


def main():
    model_path, tsv, batch, micro, capacity = sys.argv[1:6]
    epochs = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    model = json.load(open(model_path))
    batch, micro, capacity = int(batch), int(micro), int(capacity)
    n_dense = model["input"].get("dense", 0)
    layers = layers_of(model)
    rows = []
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        keys = f[1 + n_dense:]
        rows.append([[int(k, 16) for k in col.split(",") if k] for col in keys])
    count, stamp = {}, {}
    cached, heap = set(), []
    seq = lookups = hits = misses = write_backs = 0
    micro = min(micro, batch)
    cap_micro = (batch + micro - 1) // micro
    for _ in range(epochs):
        for first in range(0, len(rows), batch):
            step = rows[first:first + batch]
            touched = {}  # row -> cached (True) or staged (False)
            for lo in range(0, len(step), cap_micro):
                for li, slots in enumerate(layers):
                    for sample in step[lo:lo + cap_micro]:
                        for j, s in enumerate(slots):
                            for key in sample[s]:
                                r = (li, j, key)
                                seq += 1
                                lookups += 1
                                count[r] = count.get(r, 0) + 1
                                stamp[r] = seq
                                if r in touched:
                                    hits += touched[r]
                                    continue
                                if r in cached:
                                    hits += 1
                                    touched[r] = True
                                    continue
                                misses += 1
                                if len(cached) == capacity:
                                    # the lowest cached row the step has not used
                                    while heap and (heap[0][2] not in cached or heap[0][2] in touched
                                                    or heap[0][:2] != (count[heap[0][2]], stamp[heap[0][2]])):
                                        heapq.heappop(heap)
                                    if heap and count[r] > heap[0][0]:
                                        cached.discard(heapq.heappop(heap)[2])
                                        write_backs += 1
                                if len(cached) < capacity:
                                    cached.add(r)
                                    touched[r] = True
                                else:
                                    touched[r] = False
            for r, kept in touched.items():
                if kept:
                    heapq.heappush(heap, (count[r], stamp[r], r))
                else:
                    write_backs += 1
    print(json.dumps({"lookups": lookups, "hits": hits, "misses": misses, "write_backs": write_backs}))


if __name__ == "__main__":
    main()
