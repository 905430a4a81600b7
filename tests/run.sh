#!/bin/sh
# tests/run.sh [--only] TEST...
# Runs every unit test binary given as arguments (cmocka, TAP output) and
# every bats file under tests/cli (each test's time beside it, the five
# slowest listed at the end), and ends with one summary line:
#   N passed, N failed, N skipped
# With --only, it runs just the TESTs given: binaries, and bats files (the
# arguments that end in .bats), so `make test T=...` runs one test.
# A test binary that dies without reporting (a sanitizer abort) counts as a
# failure.  HPS_BIN points the bats tests at the binaries under test.
set -u
here=$(cd "$(dirname "$0")" && pwd)
only=0
if [ "${1:-}" = --only ]; then only=1; shift; fi
bats_files=""
log=$(mktemp)
rcf=$(mktemp)
trap 'rm -f "$log" "$rcf"' EXIT
status=0
# Each line is shown as it comes (sed -u), not after the binary or the bats
# run ends; the log keeps the bare TAP lines for the counts below.
for t in "$@"; do
    case $t in *.bats) bats_files="$bats_files $t"; continue ;; esac
    name=$(basename "$t")
    { CMOCKA_MESSAGE_OUTPUT=TAP "$t" 2>&1; echo $? > "$rcf"; } | tee "$log.one" | sed -u "s|^|$name: |"
    cat "$log.one" >> "$log"
    rc=$(cat "$rcf")
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$log.one"; then
        echo "not ok - $name exited with status $rc" | tee -a "$log"
    fi
    rm -f "$log.one"
done
# Two bats files at a time where GNU parallel is (make deps installs it;
# HPS_TEST_JOBS=1 runs one at a time): a test waits on python, mpirun's
# start and files more than it computes, so two share 2 cores well.  A
# file's own tests run in order, one at a time: they share setup_file's
# data, and examples.bats one command's output.  The files named in
# `alone` run after, one at a time: their mpirun ranks would oversubscribe
# the cores beside another file, profile.bats checks what it measures and
# bench.bats the CPU that others use.
alone="dist.bats rows.bats tables.bats profile.bats bench.bats"
jobs=""
if [ "${HPS_TEST_JOBS:-2}" -gt 1 ] && command -v parallel >/dev/null 2>&1; then
    jobs="--jobs ${HPS_TEST_JOBS:-2} --no-parallelize-within-files"
fi
if [ "$only" -eq 0 ]; then
    bats_files=$(ls "$here"/cli/*.bats 2>/dev/null)
fi
together="" apart=""
for f in $bats_files; do
    case " $alone " in
    *" $(basename "$f") "*) [ -n "$jobs" ] && apart="$apart $f" || together="$together $f" ;;
    *) together="$together $f" ;;
    esac
done
# shellcheck disable=SC2086 # one word a file, $jobs: words
{
    [ -z "$together" ] || HPS_BIN="${HPS_BIN:-$here/../bin}" bats --tap --timing $jobs $together 2>&1
    [ -z "$apart" ] || HPS_BIN="${HPS_BIN:-$here/../bin}" bats --tap --timing $apart 2>&1
} | tee -a "$log"
# The slowest bats tests, so that the suite's time (CI's budget: make check
# under 10 minutes) has names beside it.
grep -E '^(not )?ok [0-9]+ .* in [0-9]+ms' "$log" | grep -vi '# skip' |
    sed -E 's/^(not )?ok [0-9]+ (.*) in ([0-9]+)ms.*/\3 \2/' | sort -rn | head -5 |
    awk '{ ms = $1; $1 = ""; printf "slow: %6.1f s %s\n", ms / 1000, $0 }'
# cmocka reports a skip as "not ok N # SKIP", bats as "ok N # skip"
skipped=$(grep -Eci '^(not )?ok .*# skip' "$log")
passed=$(grep -E '^ok ' "$log" | grep -Evic '# skip')
failed=$(grep -E '^not ok' "$log" | grep -Evic '# skip')
[ "$failed" -eq 0 ] || status=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
