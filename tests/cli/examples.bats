#!/usr/bin/env bats
# The examples the pages show are what their commands print: each output block
# of man/hps-plan.1's EXAMPLES and of README.md is marked with the command that
# prints it (roff: .\" example-output: CMD ... .\" end example-output; markdown:
# <!-- example-output: CMD --> before a ``` fence), and is run here on testdata
# and compared, so a page cannot go stale.

load helpers

setup() {
    TMP=$(mktemp -d)
    cd "$ROOT"
}

teardown() {
    rm -rf "$TMP"
}

# Writes the Nth marked block of FILE to DIR/N.cmd (its command) and DIR/N.out
# (the text the page shows, roff escapes undone); prints how many there are.
# A marker left open fails.
examples_extract() { # FILE DIR
    mkdir -p "$2"
    awk -v dir="$2" '
        function unroff(s) { gsub(/\\-/, "-", s); gsub(/\\e/, "\\", s); return s }
        state == 0 && match($0, /^\.\\" example-output: /) {
            n++; print substr($0, RLENGTH + 1) > (dir "/" n ".cmd"); printf "" > (dir "/" n ".out")
            state = 1; next }
        state == 0 && /^<!-- example-output: .* -->$/ {
            n++; s = $0; sub(/^<!-- example-output: /, "", s); sub(/ -->$/, "", s)
            print s > (dir "/" n ".cmd"); printf "" > (dir "/" n ".out")
            state = 2; next }
        state == 1 && /^\.\\" end example-output$/ { state = 0; next }
        state == 1 { print unroff($0) > (dir "/" n ".out"); next }
        state == 2 && /^```$/ { if (++fences == 2) { state = 0; fences = 0 }; next }
        state == 2 && fences == 0 { print "no ``` fence after the marker of " n > "/dev/stderr"; exit 1 }
        state == 2 { print > (dir "/" n ".out"); next }
        END { if (state) { print "example " n ": no end marker" > "/dev/stderr"; exit 1 }; print n + 0 }
    ' "$1"
}

# The page's visible text, roff escapes undone, continued lines joined and
# blanks squeezed: a marker's command must be shown in it.
visible_text() { # FILE
    grep -v 'example-output' "$1" | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' \
        | sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' | tr -s ' \t' '  '
}

# Runs CMD into OUT.got and OUT.err.  README.md shows some of hps-plan(1)'s
# examples (a long rl search among them): a command runs once
# a file, its output kept in BATS_FILE_TMPDIR for the test after.
example_run() { # CMD OUT
    local key
    key=$BATS_FILE_TMPDIR/$(printf '%s' "$1" | md5sum | cut -c1-32)
    if [ ! -e "$key.got" ]; then
        (PATH=$HPS_BIN:$PATH; eval "$1") > "$key.got.tmp" 2> "$key.err"
        mv "$key.got.tmp" "$key.got"
    fi
    cp "$key.got" "$2.got"
    cp "$key.err" "$2.err"
}

check_examples() { # FILE
    local n i cmd
    n=$(examples_extract "$1" "$TMP/ex")
    [ "$n" -ge 1 ]
    visible_text "$1" > "$TMP/visible"
    for i in $(seq 1 "$n"); do
        cmd=$(tr -s ' \t' '  ' < "$TMP/ex/$i.cmd")
        grep -qF -- "$cmd" "$TMP/visible" || { echo "$1: example $i: '$cmd' is not shown in the page"; return 1; }
        example_run "$cmd" "$TMP/ex/$i"
        # a search cut by --time-limit (a sanitizer build on a busy machine)
        # gives this machine's plan, not the page's: it cannot be compared
        if grep -q -- '--time-limit .* cut the .* search' "$TMP/ex/$i.err"; then
            echo "# $1: example $i: cut by --time-limit here, not compared: $(cat "$TMP/ex/$i.err")" >&3
            continue
        fi
        cat "$TMP/ex/$i.err" >&2
        diff -u "$TMP/ex/$i.out" "$TMP/ex/$i.got" || { echo "$1: example $i ($cmd) is stale"; return 1; }
    done
}

@test "examples: hps-plan(1)'s EXAMPLES output is what its command prints" {
    check_examples man/hps-plan.1
}

@test "examples: README.md's output blocks are what their commands print" {
    check_examples README.md
}
