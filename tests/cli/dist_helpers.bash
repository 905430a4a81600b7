# Shared by dist.bats and tests/cluster/cluster.bats: reading hps-train's
# metrics (NDJSON) and comparing runs.  Tests that use them set $TMP.

# Whether hps-train $1 was built with Open MPI: its --version's features
# name mpi (an MPI=0 build says "mpi: none" on a line of its own).
built_with_mpi() {
    "$1" --version | grep -Eq '^features:( [^ ]+)* mpi( |$)'
}

# What mpirun needs in the tests.
mpi_test_env() {
    # root (CI, containers): Open MPI refuses to start without these
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # sanitizer builds (make asan): Open MPI's own allocations at exit are not
    # ours.  Its components stay loaded and stacks are unwound in full, so that
    # tests/lsan-mpi.supp can name the libraries they come from.
    export OMPI_MCA_mca_base_component_disable_dlclose=1
    export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
}

# The "step" losses of a metrics file, one per line.
losses() {
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["event"] == "step": print(o["loss"])' "$1"
}

# A field of the "dist" record (or of another event's last record).
dist_field() {
    python3 -c 'import json,sys
o = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["event"] == sys.argv[3]][-1]
print(eval(sys.argv[2], {}, {"o": o}))' "$1" "$2" "${3:-dist}"
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

# Two safetensors exports hold the same tensors: dense ones alike, embedding
# rows alike when matched by key (row order may differ), within 1e-4 + 1e-3
# relative.  With $3, one process's export of $1's run with its sums in
# another order (--micro-batches), an element may differ from $1 by twice
# what $3's does more: the elements AdaGrad magnifies rounding in
# (hps-train(1) DISTRIBUTED).  Twice: the two orders are not the same, so
# neither bounds the other (on deepfm's worst element the workers' move is
# 0.7 of --micro-batches 1's).
same_export() {
    python3 - "$@" <<'PY'
import array, json, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    head.pop("__metadata__", None)
    out = {}
    for k, v in head.items():
        a = array.array({"F32": "f", "I64": "q"}[v["dtype"]])
        a.frombytes(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
        cols = v["shape"][1] if len(v["shape"]) == 2 else 1
        out[k] = [list(a[i:i + cols]) for i in range(0, len(a), cols)]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
c = load(sys.argv[3]) if len(sys.argv) > 3 else a
assert sorted(a) == sorted(b) == sorted(c), (sorted(a), sorted(b), sorted(c))
beyond = 0
for k in a:
    if k.endswith(".keys"):
        continue
    x, y, z = a[k], b[k], c[k]
    keys = k[:-len(".weight")] + ".keys"
    if keys in a:  # embedding rows: matched by key
        assert sorted(a[keys]) == sorted(b[keys]) == sorted(c[keys]), k
        x, y, z = ([r for _, r in sorted(zip(t[keys], t[k]))] for t in (a, b, c))
    assert len(x) == len(y) == len(z) > 0, (k, len(x), len(y), len(z))
    for rx, ry, rz in zip(x, y, z):
        for u, v, w in zip(rx, ry, rz):
            tol = 1e-4 + 1e-3 * abs(u)
            beyond += abs(u - v) > tol
            assert abs(u - v) <= tol + 2 * abs(u - w), (k, u, v, w)
print(len(a), "tensors alike,", beyond, "elements beyond 1e-4 + 1e-3 relative")
PY
}
