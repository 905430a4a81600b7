#!/bin/sh
# Regenerates the binary seeds of the fuzz targets (tests/fuzz/seeds/) from
# testdata with the tools in BIN (default bin/):  tests/fuzz/make-seeds.sh [BIN]
# Run it after a change to the shard, manifest or checkpoint format.
# Beside the whole files, the shard and checkpoint targets take payloads
# (tests/fuzz/fuzz_shard.c, fuzz_ckpt.c): blocks of the shards behind their
# 8-byte prefix, and the checkpoint's payload, decompressed here.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/bin}
seeds=$root/tests/fuzz/seeds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -n 20 "$root/testdata/data/criteo-small.tsv" > "$tmp/c.tsv"
"$bin/hps-shard" -q --block-rows 8 -o "$tmp/c" "$tmp/c.tsv"
"$bin/hps-shard" -q --format libsvm --classes 5 --block-rows 16 -o "$tmp/l" "$root/testdata/data/libsvm-multiclass.svm"
"$bin/hps-shard" -q --format libsvm --dense 20 --block-rows 16 -o "$tmp/d" "$root/testdata/data/libsvm-binary.svm"
"$bin/hps-train" --model "$root/testdata/models/libsvm-logreg.json" --data "$tmp/l" --threads 1 -q \
    --checkpoint "$tmp/ck"
"$bin/hps-train" --model "$root/testdata/models/libsvm-logreg.json" --data "$tmp/l" --threads 1 -q \
    --export "$tmp/m.safetensors"
# a delta: a second day on the same data from the checkpoint, against the first day's export
"$bin/hps-train" --model "$root/testdata/models/libsvm-logreg.json" --data "$tmp/l" --threads 1 -q \
    --checkpoint "$tmp/ck1" --export "$tmp/d1.safetensors"
tail -n 40 "$root/testdata/data/libsvm-multiclass.svm" > "$tmp/l2.svm"
"$bin/hps-shard" -q --format libsvm --classes 5 --block-rows 16 -o "$tmp/l2" "$tmp/l2.svm"
"$bin/hps-train" --model "$root/testdata/models/libsvm-logreg.json" --data "$tmp/l2" --threads 1 -q \
    --continue-from "$tmp/ck1" --export "$tmp/d2.safetensors" --delta "$tmp/d2.delta" \
    --delta-since "$tmp/d1.safetensors"
# row-wise AdaGrad tables of fp16 rows with admission counts (and each row's day)
"$bin/hps-train" --model "$root/testdata/models/libsvm-logreg.json" --data "$tmp/l" --threads 1 -q \
    --checkpoint "$tmp/ck-rowwise" --admit-after 2 --sparse-optimizer rowwise-adagrad --row-dtype fp16
mkdir -p "$seeds/shard" "$seeds/manifest" "$seeds/ckpt" "$seeds/safetensors" "$seeds/delta"
cp "$tmp/c/shard-00000.hps" "$seeds/shard/criteo.hps"
cp "$tmp/l/shard-00000.hps" "$seeds/shard/libsvm-multiclass.hps"
cp "$tmp/d/shard-00000.hps" "$seeds/shard/libsvm-dense.hps"
cp "$tmp/c/manifest.json" "$seeds/manifest/criteo.json"
cp "$tmp/l/manifest.json" "$seeds/manifest/libsvm.json"
cp "$tmp/ck"/ckpt-*.hpsckpt "$seeds/ckpt/libsvm-logreg.hpsckpt"
cp "$tmp/m.safetensors" "$seeds/safetensors/libsvm-logreg.safetensors"
cp "$root/testdata/shards-v1/criteo-small/shard-00000.hps" "$seeds/shard/criteo-v1.hps"
# the delta target's input: the base's length (u32, little-endian), the base, the delta
python3 - "$tmp/d1.safetensors" "$tmp/d2.delta" "$seeds/delta/libsvm-logreg.delta" <<'PY'
import struct, sys
base, delta = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
open(sys.argv[3], "wb").write(struct.pack("<I", len(base)) + base + delta)
PY
# a checkpoint's payload: its zstd frame after the 64-byte header
tail -c +65 "$seeds/ckpt/libsvm-logreg.hpsckpt" | zstd -dq > "$seeds/ckpt/libsvm-logreg.payload"
tail -c +65 "$tmp/ck-rowwise"/ckpt-*.hpsckpt | zstd -dq > "$seeds/ckpt/libsvm-logreg-rowwise.payload"
# each shard's first two blocks: flags (weighted, multiclass, version 2),
# n_dense, n_slots, classes, rows (u16), 0, 0, then the payload
for f in "$seeds"/shard/*.hps; do
    python3 - "$f" "$tmp/block" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
version, _, flags, dense, slots, classes = struct.unpack_from("<6I", data, 8)
index = struct.unpack_from("<Q", data, 48)[0]
blocks = struct.unpack_from("<I", data, index + 12)[0]
for b in range(min(blocks, 2)):
    off, csize, usize, rows = struct.unpack_from("<Q3I", data, index + 16 + 32 * b)
    prefix = bytes([flags & 1 | flags & 2 | (4 if version == 2 else 0), dense, slots, classes]) + \
        struct.pack("<HH", rows, 0)
    open("%s-%d.zst" % (sys.argv[2], b), "wb").write(data[off:off + csize])
    open("%s-%d.prefix" % (sys.argv[2], b), "wb").write(prefix)
PY
    for z in "$tmp"/block-*.zst; do
        out=$seeds/shard/$(basename "$f" .hps)-block${z##*block-}
        { cat "${z%.zst}.prefix"; zstd -dqc "$z"; } > "${out%.zst}.payload"
    done
    rm -f "$tmp"/block-*
done
