#!/bin/sh
# bench-shard: shard 1 GB of synthetic Criteo text and, in the same run,
# compress the same bytes with `zstd -3 -T2`; print both side by side.
#
#   tests/bench/bench-shard.sh BIN_DIR          (make bench-shard)
#   BENCH_MB=200 tests/bench/bench-shard.sh bin (a quicker run)
#
# Each side runs BENCH_REPS times (default 2), alternating, and the best
# time counts: other work on the machine only ever slows a run down.
# Peak memory is the largest resident set (/usr/bin/time's %M).
# Target: hps-shard at least half zstd's throughput while parsing and hashing.
set -eu
bin=${1:?usage: bench-shard.sh BIN_DIR}
mb=${BENCH_MB:-1000}
reps=${BENCH_REPS:-2}
threads=${BENCH_THREADS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-shard.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
command -v zstd > /dev/null || { echo "bench-shard: zstd is not installed" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-shard: /usr/bin/time is not installed (apt-get install time)" >&2; exit 1; }

# about 244 bytes a row
rows=$((mb * 1000000 / 244))
echo "bench-shard: generating $rows rows (~$mb MB) of synthetic Criteo text" >&2
"$bin/hps-shard" synth "$rows" --seed 1 -T "$threads" -o "$work/in.tsv" 2> "$work/synth.log"
in_bytes=$(stat -c %s "$work/in.tsv")
cat "$work/in.tsv" > /dev/null # into the page cache, for both sides alike

best() { # file of "seconds kb" lines -> the line with the least seconds
    sort -n "$1" | head -1
}
: > "$work/hps.t"
: > "$work/zstd.t"
i=0
while [ $i -lt "$reps" ]; do
    rm -rf "$work/shards"
    /usr/bin/time -f "%e %M" -o "$work/t" "$bin/hps-shard" -q -T "$threads" -o "$work/shards" "$work/in.tsv"
    cat "$work/t" >> "$work/hps.t"
    /usr/bin/time -f "%e %M" -o "$work/t" zstd -q -f -3 -T"$threads" "$work/in.tsv" -o "$work/in.tsv.zst"
    cat "$work/t" >> "$work/zstd.t"
    i=$((i + 1))
done
out_bytes=$(cat "$work"/shards/*.hps | wc -c)
zst_bytes=$(stat -c %s "$work/in.tsv.zst")
set -- $(best "$work/hps.t"); hps_s=$1 hps_kb=$2
set -- $(best "$work/zstd.t"); zstd_s=$1 zstd_kb=$2

awk -v ib="$in_bytes" -v rows="$rows" -v hs="$hps_s" -v hk="$hps_kb" -v ob="$out_bytes" \
    -v zs="$zstd_s" -v zk="$zstd_kb" -v zb="$zst_bytes" -v t="$threads" -v reps="$reps" 'BEGIN {
    printf "input: %.1f MB, %d rows of synthetic Criteo text; %d threads; best of %d\n\n", ib / 1e6, rows, t, reps
    printf "%-26s %9s %8s %12s %10s %7s\n", "run", "seconds", "MB/s in", "rows/s", "peak MiB", "ratio"
    printf "%-26s %9.2f %8.0f %12.0f %10.0f %7.2f\n", "hps-shard (parse+hash+zstd)", hs, ib / 1e6 / hs, rows / hs, hk / 1024, ib / ob
    printf "%-26s %9.2f %8.0f %12s %10.0f %7.2f\n", "zstd -3 -T" t, zs, ib / 1e6 / zs, "-", zk / 1024, ib / zb
    printf "\nhps-shard / zstd throughput: %.2f (target >= 0.50)\n", zs / hs
}'
