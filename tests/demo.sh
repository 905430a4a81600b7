#!/bin/sh
# make demo: runs the hps pipeline as far as it exists on data it makes itself.
# $1 is the directory of the hps binaries.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/demo-out
mkdir -p "$out"
model=$root/testdata/models/demo-ctr.json

echo "== hps-profile: the demo CTR model on this machine, plus two GPU kinds estimated from spec sheets" >&2
"$bin/hps-profile" -m "$model" \
    --estimate "$root/testdata/devices/gpu-t4.json" \
    --estimate "$root/testdata/devices/gpu-a100.json" -o "$out/profile.json"
"$bin/hps-profile" --merge "$out/profile.json" --format table
echo >&2
echo "profile written to $out/profile.json" >&2
