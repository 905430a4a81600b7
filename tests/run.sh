#!/bin/sh
# Runs every unit test binary given as arguments (cmocka, TAP output) and
# every bats file under tests/cli, and ends with one summary line:
#   N passed, N failed, N skipped
# A test binary that dies without reporting (a sanitizer abort) counts as a
# failure.  HPS_BIN points the bats tests at the binaries under test.
set -u
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for t in "$@"; do
    out=$(CMOCKA_MESSAGE_OUTPUT=TAP "$t" 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed "s|^|$(basename "$t"): |"
    printf '%s\n' "$out" >> "$log"
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^not ok'; then
        echo "not ok - $(basename "$t") exited with status $rc" | tee -a "$log"
    fi
done
if ls "$here"/cli/*.bats >/dev/null 2>&1; then
    out=$(HPS_BIN="${HPS_BIN:-$here/../bin}" bats --tap "$here"/cli/*.bats 2>&1)
    printf '%s\n' "$out"
    printf '%s\n' "$out" >> "$log"
fi
# cmocka reports a skip as "not ok N # SKIP", bats as "ok N # skip"
skipped=$(grep -Eci '^(not )?ok .*# skip' "$log")
passed=$(grep -E '^ok ' "$log" | grep -Evic '# skip')
failed=$(grep -E '^not ok' "$log" | grep -Evic '# skip')
[ "$failed" -eq 0 ] || status=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
