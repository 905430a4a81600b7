#!/bin/sh
# Open MPI's launcher agent for the test hosts (hosts.sh): where a real
# cluster runs `ssh HOST COMMAND`, this runs COMMAND inside network namespace
# HOST, with HOST as its host name (its own UTS namespace), so that Open MPI
# and hps-train see a separate host.
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname '$host' && $*"
