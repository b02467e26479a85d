#!/usr/bin/env bash
# bench/controllers-informers.sh — the built-in controllers' cost with 10,000 pods on
# simulated nodes, for two kube binaries side by side in one run (before and after the
# controllers shared one informer factory, internal/controllers/sharedinformers).
#
# For each binary: `kube server` on an etcd of its own (so its RSS and CPU exclude etcd)
# with --sim-nodes NODES; create DEPLOYMENTS Deployments of REPLICAS pods each and time
# until `kubectl rollout status` says every one is done; then hold IDLE with everything
# Running. Reported from /proc: the server's CPU seconds for the scale-up and for the
# idle hold, its RSS at the end; and its pod list/watch requests (from an audit log of
# list and watch verbs on pods).
#
# With WINDOW=S the scale-up is not waited for: the figures are taken S seconds after the
# creates (pods Available then, CPU and RSS), and with PARALLEL=1 both binaries run at once
# (same load for both; each on its own etcd and port) — for a machine too loaded to wait.
#
# Usage: bench/controllers-informers.sh BIN_BEFORE BIN_AFTER
# Env: NODES (100) DEPLOYMENTS (10) REPLICAS (1000) IDLE (60) OUT (/tmp/ctrlinf) PORT (18443)
#      WINDOW (unset) PARALLEL (unset)
#      ETCD (an etcd binary; default: `kube etcd` of the binary under test)
# Run under the machine-wide lock: flock /tmp/kube-bench.lock bench/controllers-informers.sh A B
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1; AFTER=$2
NODES=${NODES:-100}; DEPLOYMENTS=${DEPLOYMENTS:-10}; REPLICAS=${REPLICAS:-1000}; IDLE=${IDLE:-60}
OUT=${OUT:-/tmp/ctrlinf}; PORT=${PORT:-18443}; EPORT=$((PORT+1000))
mkdir -p "$OUT"
SRV=""; ETCD_PID=""
cleanup() {
  [[ -n $SRV ]] && { kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; }
  [[ -n $ETCD_PID ]] && { kill "$ETCD_PID" 2>/dev/null || true; wait "$ETCD_PID" 2>/dev/null || true; }
  SRV=""; ETCD_PID=""
}
trap cleanup EXIT
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; } # utime+stime, seconds (USER_HZ 100)
rss() { awk '/VmRSS/{printf "%.0f", $2/1024}' "/proc/$1/status"; }

run() { # $1 label, $2 binary
  local label=$1 bin=$2 dir=$OUT/$1
  rm -rf "$dir"; mkdir -p "$dir"
  "$bin" etcd --name e1 --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$EPORT" \
    --listen-peer-urls "http://127.0.0.1:$((EPORT+1))" --initial-cluster "e1=http://127.0.0.1:$((EPORT+1))" >"$dir/etcd.log" 2>&1 &
  ETCD_PID=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$EPORT/health" >/dev/null 2>&1 && break; sleep 0.2; done
  cat >"$dir/audit.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseComplete]
rules:
- level: Metadata
  verbs: [list, watch]
  resources: [{group: "", resources: [pods]}]
- level: None
EOF
  "$bin" server --data-dir "$dir/data" --secure-port "$PORT" --etcd-servers "http://127.0.0.1:$EPORT" --log-level error \
    --sim-nodes "$NODES" --audit-policy-file "$dir/audit.yaml" --audit-log-path "$dir/audit.log" >"$dir/server.log" 2>&1 &
  SRV=$!
  K=$dir/data/kubeconfig
  for _ in $(seq 300); do [[ -f $K ]] && kubectl --kubeconfig "$K" get --raw /readyz >/dev/null 2>&1 && break; sleep 1; done
  kubectl --kubeconfig "$K" get --raw /readyz >/dev/null || { echo "$label: server not ready; $dir/server.log" >&2; exit 1; }
  while [[ $(kubectl --kubeconfig "$K" get nodes --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l) -lt $NODES ]]; do sleep 2; done
  sleep 10 # settle after start
  local c0 t0 c1 t1 c2
  c0=$(cpu $SRV); t0=$(date +%s.%N)
  for i in $(seq "$DEPLOYMENTS"); do
    kubectl --kubeconfig "$K" create deployment "web-$i" --image=registry.example/web:v1 --replicas="$REPLICAS" >/dev/null
  done
  if [[ -n ${WINDOW:-} ]]; then
    sleep "$WINDOW"
  else
    for i in $(seq "$DEPLOYMENTS"); do
      kubectl --kubeconfig "$K" rollout status "deployment/web-$i" --timeout=30m >/dev/null
    done
  fi
  c1=$(cpu $SRV); t1=$(date +%s.%N)
  local avail
  avail=$(kubectl --kubeconfig "$K" get deploy -o jsonpath='{range .items[*]}{.status.availableReplicas}{"\n"}{end}' | awk '{s+=$1} END {print s+0}')
  sleep "$IDLE"
  c2=$(cpu $SRV)
  local lists watches
  lists=$(grep -c '"verb":"list"' "$dir/audit.log" || true)
  watches=$(grep -c '"verb":"watch"' "$dir/audit.log" || true)
  printf '%s: %d of %d pods Available after %.1f s, server CPU %.1f s; idle %d s: CPU %.2f s; RSS %s MiB; pod lists %s, pod watches %s; load %s\n' \
    "$label" "$avail" $((DEPLOYMENTS*REPLICAS)) "$(echo "$t1 - $t0" | bc)" "$(echo "$c1 - $c0" | bc)" "$IDLE" "$(echo "$c2 - $c1" | bc)" \
    "$(rss $SRV)" "$lists" "$watches" "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/results.txt"
  cleanup
}

echo "== $(date -u +%FT%TZ) NODES=$NODES DEPLOYMENTS=$DEPLOYMENTS REPLICAS=$REPLICAS" | tee -a "$OUT/results.txt"
if [[ -n ${PARALLEL:-} ]]; then
  (run before "$BEFORE") &
  b=$!
  (PORT=$((PORT+10)) EPORT=$((EPORT+10)); run after "$AFTER") &
  a=$!
  wait $b $a
else
  run before "$BEFORE"
  run after "$AFTER"
fi
