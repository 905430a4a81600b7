# Shared by dist.bats and tests/cluster/cluster.bats: reading hps-train's
# metrics (NDJSON) and comparing runs.  Tests that use them set $TMP.

# The "step" losses of a metrics file, one per line.
losses() {
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["event"] == "step": print(o["loss"])' "$1"
}

# A field of the "dist" record.
dist_field() {
    python3 -c 'import json,sys
o = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == "dist"][-1]
print(eval(sys.argv[2], {}, {"o": o}))' "$1" "$2"
}

# The step losses of two metrics files agree within 1e-4 relative (float sums in
# another order).
same_losses() {
    losses "$1" > "$TMP/a"
    losses "$2" > "$TMP/b"
    [ "$(wc -l < "$TMP/a")" -ge 12 ]
    [ "$(wc -l < "$TMP/a")" -eq "$(wc -l < "$TMP/b")" ]
    paste "$TMP/a" "$TMP/b" | awk '{d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) bad++}
                                    END {exit bad > 0}'
}

# The eval records of a metrics file: "logloss auc", one per epoch.
evals() {
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["event"] == "eval": print(o["logloss"], o["auc"])' "$1"
}

# Their eval records agree within 1e-4 relative.
same_evals() {
    evals "$1" > "$TMP/ea"
    evals "$2" > "$TMP/eb"
    [ "$(wc -l < "$TMP/ea")" -ge 2 ]
    [ "$(wc -l < "$TMP/ea")" -eq "$(wc -l < "$TMP/eb")" ]
    paste "$TMP/ea" "$TMP/eb" | awk '{for (i = 1; i <= 2; i++) {d = $i - $(i + 2); if (d < 0) d = -d;
                                          if (d > 1e-4 * $i) bad++}} END {exit bad > 0}'
}
