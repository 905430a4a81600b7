#!/bin/sh
# Regenerates the binary seeds of the fuzz targets (tests/fuzz/seeds/) from
# testdata with the tools in BIN (default bin/):  tests/fuzz/make-seeds.sh [BIN]
# Run it after a change to the shard, manifest or checkpoint format.
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
mkdir -p "$seeds/shard" "$seeds/manifest" "$seeds/ckpt" "$seeds/safetensors"
cp "$tmp/c/shard-00000.hps" "$seeds/shard/criteo.hps"
cp "$tmp/l/shard-00000.hps" "$seeds/shard/libsvm-multiclass.hps"
cp "$tmp/d/shard-00000.hps" "$seeds/shard/libsvm-dense.hps"
cp "$tmp/c/manifest.json" "$seeds/manifest/criteo.json"
cp "$tmp/l/manifest.json" "$seeds/manifest/libsvm.json"
cp "$tmp/ck"/ckpt-*.hpsckpt "$seeds/ckpt/libsvm-logreg.hpsckpt"
cp "$tmp/m.safetensors" "$seeds/safetensors/libsvm-logreg.safetensors"
