#!/usr/bin/env bats
# The rl policy built into hps-plan (lib/plan/rl-policy.json) is what
# `make plan-policy` writes: training it again from the source gives the same
# file.  About 2 minutes of CPU (more under make asan), past make check's
# budget: `make check-policy` runs it (HPS_CHECK_POLICY=1), and CI runs that
# beside make check (.ci/run); make check reports it skipped.

load helpers
HPS_BIN=${HPS_BIN:-$BATS_TEST_DIRNAME/../../bin}
ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

setup() {
    TMP=$(mktemp -d)
    cd "$ROOT"
}

teardown() {
    rm -rf "$TMP"
}

@test "policy: the built-in policy is the one make plan-policy writes" {
    [ "${HPS_CHECK_POLICY:-0}" = 1 ] || skip "2 min of CPU: make check-policy runs it (CI does)"
    # the Makefile's training command, at its settings, gives lib/plan/rl-policy.json
    local args
    args=$(sed -n 's/^PLAN_POLICY_TRAIN := //p' Makefile)
    [ -n "$args" ]
    "$HPS_BIN/hps-plan" --train-policy "$TMP/p.json" $args
    cmp "$TMP/p.json" lib/plan/rl-policy.json
}
