#!/usr/bin/env python3
"""Replays a run's key stream through the cache rule of hps-train(1) ROWS and
prints what hps-train's metrics must say: lookups, hits, misses, write-backs.

usage: cache_replay.py MODEL TSV BATCH MICRO_BATCHES CAPACITY [EPOCHS [UNITS]]

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

With UNITS, the cache under mpirun over that many units' shards (ROWS,
several units): each step, each unit (in order) reads the distinct rows its
slice of the batch touched (an equal share each), layer by layer in the
order first touched, from the row's owner (mix64(key) mod UNITS), telling
it how many lookups of the row the slice made; the owner's cache takes the
read as that many lookups in a row by the rule above, stamped once (the
first of them a hit or a miss that decides, the others hits unless the
row is staged); the counts are summed over the owners.  A CAPACITY above
the rows is rows: hbm in shards.
"""
import heapq
import json
import math
import sys


def layers_of(model):
    names = [s["name"] for s in model["input"]["slots"]]
    out = []
    for layer in model["layers"]:
        if layer.get("type") in ("embedding", "linear"):  # the layers with a table
            slots = layer.get("slots") or names
            out.append([names.index(s) for s in slots])
    return out


MASK = (1 << 64) - 1


def mix64(x):
    """hps_mix64 (splitmix64's finaliser): the routing rule's hash."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Cache:
    """One train_rows: counts, stamps, what is cached, and a step's rows."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.count, self.stamp = {}, {}
        self.cached, self.heap = set(), []
        self.touched = {}  # this step's rows: cached (True) or staged (False)
        self.seq = self.lookups = self.hits = self.misses = self.write_backs = 0

    def lookup(self, r, n=1):
        """n lookups of row r in a row, stamped once."""
        self.seq += 1
        self.lookups += n
        first = self.count.get(r, 0) + 1  # the count the first of them gives it
        self.count[r] = first + n - 1
        self.stamp[r] = self.seq
        if r in self.touched:
            self.hits += n * self.touched[r]
            return
        if r in self.cached:
            self.hits += n
            self.touched[r] = True
            return
        self.misses += 1
        heap, count, stamp = self.heap, self.count, self.stamp
        if len(self.cached) == self.capacity:
            # the lowest cached row the step has not used
            while heap and (heap[0][2] not in self.cached or heap[0][2] in self.touched
                            or heap[0][:2] != (count[heap[0][2]], stamp[heap[0][2]])):
                heapq.heappop(heap)
            if heap and first > heap[0][0]:
                self.cached.discard(heapq.heappop(heap)[2])
                self.write_backs += 1
        if len(self.cached) < self.capacity:
            self.cached.add(r)
            self.touched[r] = True
            self.hits += n - 1
        else:
            self.touched[r] = False

    def step_end(self):
        for r, kept in self.touched.items():
            if kept:
                heapq.heappush(self.heap, (self.count[r], self.stamp[r], r))
            else:
                self.write_backs += 1
        self.touched = {}


def cut(n, units, w):
    """hps_dist_slice's bound for equal shares: lround(w / units * n)."""
    return int(math.floor(w * n / units + 0.5))


def main():
    model_path, tsv, batch, micro, capacity = sys.argv[1:6]
    epochs = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    units = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    model = json.load(open(model_path))
    batch, micro, capacity = int(batch), int(micro), int(capacity)
    n_dense = model["input"].get("dense", 0)
    layers = layers_of(model)
    rows = []
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        keys = f[1 + n_dense:]
        rows.append([[int(k, 16) for k in col.split(",") if k] for col in keys])
    caches = [Cache(capacity) for _ in range(max(units, 1))]
    micro = min(micro, batch)
    cap_micro = (batch + micro - 1) // micro
    for _ in range(epochs):
        for first in range(0, len(rows), batch):
            step = rows[first:first + batch]
            if not units:  # one process: micro-batch by micro-batch, layer by layer
                for lo in range(0, len(step), cap_micro):
                    for li, slots in enumerate(layers):
                        for sample in step[lo:lo + cap_micro]:
                            for j, s in enumerate(slots):
                                for key in sample[s]:
                                    caches[0].lookup((li, j, key))
            for w in range(units):
                mine = step[cut(len(step), units, w):cut(len(step), units, w + 1)]
                for li, slots in enumerate(layers):
                    seen = {}  # ordered: the rows as first touched, and their lookups
                    for sample in mine:
                        for j, s in enumerate(slots):
                            for key in sample[s]:
                                r = (li, j, key)
                                seen[r] = seen.get(r, 0) + 1
                    for r, n in seen.items():
                        caches[mix64(r[2]) % units].lookup(r, n)
            for c in caches:
                c.step_end()
    counts = ("lookups", "hits", "misses", "write_backs")
    print(json.dumps({k: sum(getattr(c, k) for c in caches) for k in counts}))


if __name__ == "__main__":
    main()
