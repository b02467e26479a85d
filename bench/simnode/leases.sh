#!/usr/bin/env bash
# bench/simnode/leases.sh — what 5,000 nodes' heartbeats cost the server: a fresh `kube server`
# (the flags of run.sh), `kube sim` with NODES nodes and no pods; after WARM seconds (past the
# watch cache ring's 75 s), 30 s of the server's and the simulator's CPU from /proc, the Lease
# renewals the simulator counted, the server's RSS, and CPU and heap profiles in OUT/NAME.
#
# Usage: bench/simnode/leases.sh KUBE_BIN NAME   Env: NODES (5000) WARM (120) OUT (/tmp/leasebench)
#        PORT (29743)
set -euo pipefail
BIN=$(readlink -f "${1:?usage: leases.sh KUBE_BIN NAME}"); NAME=${2:?usage: leases.sh KUBE_BIN NAME}
NODES=${NODES:-5000}; WARM=${WARM:-120}; OUT=${OUT:-/tmp/leasebench}; PORT=${PORT:-29743}
D=$OUT/$NAME; rm -rf "$D"; mkdir -p "$D"
"$BIN" server --data-dir "$D/data" --secure-port "$PORT" --log-level error --scheduler=false --disable-workload-controllers \
  '--cluster-controllers=*,-taint-eviction-controller,-pod-garbage-collector,-ttl-controller' >"$D/server.log" 2>&1 &
SRV=$!; SIM=""
trap 'kill $SIM $SRV 2>/dev/null || true; wait 2>/dev/null || true' EXIT
K=$D/data/kubeconfig
for _ in $(seq 200); do [[ -f $K ]] && kubectl --kubeconfig "$K" get --raw /readyz >/dev/null 2>&1 && break; sleep 0.3; done
"$BIN" sim --kubeconfig "$K" --nodes "$NODES" --workers 64 --qps 20000 --stats-interval 10s --log-level warn >"$D/sim.log" 2>&1 &
SIM=$!
sleep "$WARM"
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
renewals() { tail -1 "$D/sim.log" | sed 's/.*lease-renewals=\([0-9]*\).*/\1/'; }
t0=$(cpu $SRV); s0=$(cpu $SIM); l0=$(renewals)
kubectl --kubeconfig "$K" get --raw "/debug/pprof/profile?seconds=30" >"$D/cpu.pprof"
t1=$(cpu $SRV); s1=$(cpu $SIM); l1=$(renewals)
kubectl --kubeconfig "$K" get --raw /debug/pprof/heap >"$D/heap.pprof"
ready=$(kubectl --kubeconfig "$K" get nodes --no-headers | grep -c ' Ready' || true)
echo "$NAME server_cores=$(echo "scale=3;($t1-$t0)/100/30" | bc) sim_cores=$(echo "scale=3;($s1-$s0)/100/30" | bc)" \
  "renewals_per_s=$(echo "scale=1;($l1-$l0)/30" | bc) server_rss_mb=$(awk '/VmRSS/{print int($2/1024)}' /proc/$SRV/status)" \
  "sim_rss_mb=$(awk '/VmRSS/{print int($2/1024)}' /proc/$SIM/status) nodes_ready=$ready load=$(cut -d' ' -f1 /proc/loadavg)"
