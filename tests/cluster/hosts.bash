# Test hosts on one machine (sourced by tests/cluster/ and bench-cluster):
# N Linux network namespaces hps-h1 .. hps-hN, each with a veth pair to one
# bridge, addresses 10.231.15.11.. inside them and 10.231.15.1 on the bridge
# (where mpirun's own runtime listens), links shaped by tc.  Needs root.
#
#   hosts_up N [SLOW]   make hosts 1..N; host SLOW (if given) gets the slow link
#   hosts_down          remove them (also what an interrupted run left)
#   hosts_mpirun ARGS   mpirun whose ranks start inside the hosts (agent.sh),
#                       TCP on the bridge's subnet only
#
# Links: 1 Gbit/s and 200 us each way; the slow host 100 Mbit/s and 2 ms.
# netem shapes what leaves each end of a veth, so both directions are shaped.

HOSTS_NET=10.231.15
HOSTS_BRIDGE=hps-br15
HOSTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HOSTS_RATE=${HOSTS_RATE:-1gbit} HOSTS_DELAY=${HOSTS_DELAY:-200us}
HOSTS_SLOW_RATE=${HOSTS_SLOW_RATE:-100mbit} HOSTS_SLOW_DELAY=${HOSTS_SLOW_DELAY:-2ms}

# Why test hosts cannot be made here, or nothing.
hosts_unavailable() {
    [ "$(id -u)" = 0 ] || { echo "test hosts need root (ip netns)"; return; }
    command -v ip >/dev/null || { echo "ip (iproute2) is not installed"; return; }
    command -v tc >/dev/null || { echo "tc (iproute2) is not installed"; return; }
    command -v unshare >/dev/null || { echo "unshare (util-linux) is not installed"; return; }
    command -v mpirun >/dev/null || { echo "mpirun is not installed (make deps: openmpi-bin)"; return; }
    unshare --uts true 2>/dev/null || { echo "UTS namespaces cannot be made here (unshare --uts)"; return; }
    ip netns add hps-probe 2>/dev/null || { echo "network namespaces cannot be made here"; return; }
    ip netns del hps-probe
    ip link add hps-probe type bridge 2>/dev/null || { echo "bridges cannot be made here"; return; }
    ip link del hps-probe
    ip link add hps-probe type veth peer name hps-probe1 2>/dev/null || { echo "veth pairs cannot be made here"; return; }
    tc qdisc add dev hps-probe root tbf rate 1gbit burst 256kb latency 50ms 2>/dev/null ||
        { ip link del hps-probe; echo "tc cannot shape links here (no tbf qdisc)"; return; }
    ip link del hps-probe
}

# Rate and latency with netem; where the kernel has no netem (some VM
# kernels), rate alone with tbf, and hosts_up says so once.
HOSTS_SHAPED=
hosts_shape() { # DEV RATE DELAY [NS]
    local ns=${4:+ip netns exec $4}
    if $ns tc qdisc replace dev "$1" root netem rate "$2" delay "$3" limit 10000 2>/dev/null; then
        HOSTS_SHAPED="rate and latency (netem)"
    else
        $ns tc qdisc replace dev "$1" root tbf rate "$2" burst 256kb latency 50ms
        HOSTS_SHAPED="rate only (tbf: this kernel has no netem, so no added latency)"
    fi
}

hosts_up() {
    local n=$1 slow=${2:-0} i
    hosts_down
    ip link add "$HOSTS_BRIDGE" type bridge
    ip addr add "$HOSTS_NET.1/24" dev "$HOSTS_BRIDGE"
    ip link set "$HOSTS_BRIDGE" up
    mkdir -p /etc/netns
    for i in $(seq "$n"); do
        local h=hps-h$i rate=$HOSTS_RATE delay=$HOSTS_DELAY
        [ "$i" = "$slow" ] && rate=$HOSTS_SLOW_RATE delay=$HOSTS_SLOW_DELAY
        ip netns add "$h"
        ip link add "hps-v$i" type veth peer name eth0 netns "$h"
        ip link set "hps-v$i" master "$HOSTS_BRIDGE" up
        ip -n "$h" addr add "$HOSTS_NET.$((10 + i))/24" dev eth0
        ip -n "$h" link set eth0 up
        ip -n "$h" link set lo up
        hosts_shape "hps-v$i" "$rate" "$delay"
        hosts_shape eth0 "$rate" "$delay" "$h"
        # the hosts' names resolve inside them (ip netns exec binds these over /etc)
        mkdir -p "/etc/netns/$h"
        { echo "127.0.0.1 localhost"; for j in $(seq "$n"); do echo "$HOSTS_NET.$((10 + j)) hps-h$j"; done; } \
            > "/etc/netns/$h/hosts"
    done
    HOSTS_SAID="$n test hosts, links shaped: $HOSTS_SHAPED$([ "$slow" = 0 ] || echo "; hps-h$slow slow")"
}

hosts_down() {
    local h
    for h in $(ip netns list 2>/dev/null | grep -o '^hps-h[0-9]*'); do
        ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$h" 2>/dev/null || true
        rm -rf "/etc/netns/$h"
    done
    rmdir /etc/netns 2>/dev/null || true
    ip link del "$HOSTS_BRIDGE" 2>/dev/null || true
}

# The link of host I: down or up (the host's end of its veth, on the bridge).
hosts_link() { ip link set "hps-v$1" "$2"; }

hosts_mpirun() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --mca plm_rsh_agent "$HOSTS_DIR/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include "$HOSTS_NET.0/24" --mca btl_tcp_if_include "$HOSTS_NET.0/24" \
        --mca btl tcp,vader,self "$@"
}
