#!/bin/bash
# make check-cluster: the multi-host tests on test hosts made here
# (hosts.bash), or "skipped: REASON" where they cannot be made.  The hosts
# are removed on exit, whatever ends the run.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/hosts.bash"
why=$(hosts_unavailable)
if [ -n "$why" ]; then
    echo "check-cluster: skipped: $why"
    exit 0
fi
trap hosts_down EXIT
trap 'exit 130' INT TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
HPS_BIN=${HPS_BIN:-$here/../../bin} bats "$here/cluster.bats"
