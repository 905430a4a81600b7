#!/bin/sh
# bench-shard: shard synthetic text and, in the same run, compress the same
# bytes with `zstd -3 -T2`; print both side by side, for two inputs:
#   criteo  1 GB of synthetic Criteo text (hps-shard synth)
#   libsvm  MNIST-shaped libsvm rows, 784 dense features, 10 classes
#           (tests/bench/make_dense_libsvm.py), sharded with --dense 784
#
#   tests/bench/bench-shard.sh BIN_DIR          (make bench-shard)
#   BENCH_MB=200 tests/bench/bench-shard.sh bin (a quicker run)
#
# BENCH_MB sizes the Criteo input (default 1000), BENCH_SVM_MB the libsvm one
# (default 300).  Each side runs BENCH_REPS times (default 3), alternating run
# by run (each first in turn); the table gives the mean +- sd of the times.
# Peak memory is the largest resident set (/usr/bin/time's %M), the median
# run's.  Target: hps-shard at least 0.8x zstd's throughput while parsing and
# hashing.  The CPU, the load at start and end, and the verdict "quiet" or
# "NOISY: why" come with the table (bench_common.sh): noisy when the load
# was above 1 at start or end, other processes used more than 5% of the CPU,
# one side's runs spread more than BENCH_SPREAD_MAX (5%, sd/mean)
# or a run took less than BENCH_MIN_S seconds (5: give a larger BENCH_MB).
set -eu
bin=${1:?usage: bench-shard.sh BIN_DIR}
mb=${BENCH_MB:-1000}
svm_mb=${BENCH_SVM_MB:-300}
reps=${BENCH_REPS:-3}
threads=${BENCH_THREADS:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-shard.XXXXXX")
. "$root/tests/bench/bench_common.sh"
bench_begin bench-shard
trap 'rm -rf "$work" "$BENCH_NOISY_FILE" "$BENCH_TIMES_FILE"' EXIT INT TERM
command -v zstd > /dev/null || { echo "bench-shard: zstd is not installed" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-shard: /usr/bin/time is not installed (apt-get install time)" >&2; exit 1; }

# about 244 bytes a Criteo row, 1078 a libsvm row
rows=$((mb * 1000000 / 244))
svm_rows=$((svm_mb * 1000000 / 1078))
echo "bench-shard: generating $rows rows (~$mb MB) of Criteo text, $svm_rows rows (~$svm_mb MB) of libsvm" >&2
"$bin/hps-shard" synth "$rows" --seed 1 -T "$threads" -o "$work/criteo.txt" 2> "$work/synth.log"
/usr/bin/python3 "$root/tests/bench/make_dense_libsvm.py" "$svm_rows" 1 > "$work/libsvm.txt"

median() { # file of "seconds kb" lines -> the median line by seconds
    sort -n "$1" | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'
}

run_hps() {
    rm -rf "$work/shards"
    /usr/bin/time -f "%e %M" -o "$work/t" "$bin/hps-shard" -q -T "$threads" "$@" -o "$work/shards" "$in"
    cat "$work/t" >> "$work/hps.t"
}

run_zstd() {
    /usr/bin/time -f "%e %M" -o "$work/t" zstd -q -f -3 -T"$threads" "$in" -o "$in.zst"
    cat "$work/t" >> "$work/zstd.t"
}

# short NAME FILE: a run under BENCH_MIN_S seconds marks the result noisy
short() {
    min=$(sort -n "$2" | head -n 1 | cut -d' ' -f1)
    if awk -v t="$min" -v m="$BENCH_MIN_S" 'BEGIN { exit !(t < m) }'; then
        bench_noisy "$1: a run took ${min} s < $BENCH_MIN_S s (give a larger BENCH_MB or BENCH_SVM_MB)"
    fi
}

# bench NAME HPS-SHARD-OPTIONS...: one row of the table
bench() {
    name=$1
    shift
    in=$work/$name.txt
    cat "$in" > /dev/null # into the page cache, for both sides alike
    : > "$work/hps.t"
    : > "$work/zstd.t"
    i=0
    while [ $i -lt "$reps" ]; do
        if [ $((i % 2)) = 0 ]; then
            run_hps "$@"; run_zstd
        else
            run_zstd; run_hps "$@"
        fi
        i=$((i + 1))
    done
    in_bytes=$(stat -c %s "$in")
    out_bytes=$(cat "$work"/shards/*.hps | wc -c)
    zst_bytes=$(stat -c %s "$in.zst")
    n=$(wc -l < "$in")
    set -- $(median "$work/hps.t"); hps_kb=$2
    set -- $(median "$work/zstd.t"); zstd_kb=$2
    set -- $(bench_stats "$work/hps.t"); hps_s=$1 hps_sd=$2
    bench_spread "$name hps-shard" "$3"
    set -- $(bench_stats "$work/zstd.t"); zstd_s=$1 zstd_sd=$2
    bench_spread "$name zstd" "$3"
    short "$name hps-shard" "$work/hps.t"
    short "$name zstd" "$work/zstd.t"
    awk -v name="$name" -v ib="$in_bytes" -v rows="$n" -v hs="$hps_s" -v hd="$hps_sd" -v hk="$hps_kb" \
        -v ob="$out_bytes" -v zs="$zstd_s" -v zd="$zstd_sd" -v zk="$zstd_kb" -v zb="$zst_bytes" 'BEGIN {
        printf "%-7s %8.1f %6.2f+-%-5.2f %8.0f %10.0f %8.0f %6.2f | %6.2f+-%-5.2f %8.0f %8.0f %6.2f | %5.2f\n",
            name, ib / 1e6, hs, hd, ib / 1e6 / hs, rows / hs, hk / 1024, ib / ob, zs, zd, ib / 1e6 / zs,
            zk / 1024, ib / zb, zs / hs
    }' >> "$work/table"
}

: > "$work/table"
bench criteo
bench libsvm --format libsvm --classes 10 --dense 784 --transform none

printf "%d threads, mean +- sd of %d runs each, hps-shard and zstd -3 -T%d alternating\n\n" \
    "$threads" "$reps" "$threads"
printf "%-7s %8s %14s %8s %10s %8s %6s | %14s %8s %8s %6s | %5s\n" "input" "MB" \
    "hps s" "MB/s" "rows/s" "peak MiB" "ratio" "zstd s" "MB/s" "peak MiB" "ratio" "x zstd"
cat "$work/table"
printf "\nx zstd: hps-shard's throughput (parse+hash+zstd) over zstd's on the same bytes, of the mean times (target >= 0.80)\n"
bench_end
