#!/usr/bin/env bash
# run.sh — EndpointSlice update latency (bench/README.md, "Cluster controllers"): SERVICES
# Services × ENDPOINTS pods on one fixture node, SAMPLES pods turned Ready at RATE/s, the
# time until an EndpointSlice watch shows each one ready (bench/endpoints, main.go). Two runs
# on the same `kube server` build, each on a fresh data directory, workload controllers and the
# scheduler off:
#   kube  Kube's own endpointslice-controller (--cluster-controllers=endpointslice-controller)
#   peer  Kube's cluster controllers off, kube-controller-manager v1.37.2
#         --controllers=endpointslice-controller pointed at the server (its defaults:
#         --kube-api-qps 20, --kube-api-burst 30, --concurrent-service-endpoint-syncs 5)
# Usage: bench/endpoints/run.sh [PEERS_BIN]  (default /work/peers-bin). Env: SERVICES (10000),
#        ENDPOINTS (10), SAMPLES (1000), RATE (50), ONLY (kube|peer), KCM_ARGS (extra flags),
#        OUT (a directory for the binaries, logs and results.jsonl; default mktemp).
# Run the measured runs under the machine-wide lock: flock /tmp/kube-bench.lock bench/endpoints/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-/work/peers-bin}
SERVICES=${SERVICES:-10000}; ENDPOINTS=${ENDPOINTS:-10}; SAMPLES=${SAMPLES:-1000}; RATE=${RATE:-50}; ONLY=${ONLY:-}
OUT=${OUT:-$(mktemp -d /tmp/kube-epbench.XXXXXX)}
mkdir -p "$OUT"
PORT=26843
[[ -x $OUT/kube ]] || nice -n 19 go build -o "$OUT/kube" ./cmd/kube
[[ -x $OUT/epbench ]] || nice -n 19 go build -o "$OUT/epbench" ./bench/endpoints
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop_all EXIT

start_kube() { # $1 side, $2 --cluster-controllers value
  # No scheduler: the pods are bound already, and every pod sits on the one fixture node, where
  # a scheduler's per-node pod list (upstream's NodeInfo) costs O(pods) per pod update.
  "$OUT/kube" server --data-dir "$OUT/data-$1" --secure-port "$PORT" --disable-workload-controllers --scheduler=false \
    --cluster-controllers="$2" >"$OUT/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 120); do grep -q "is ready" "$OUT/$1.log" && return 0; sleep 1; done
  cat "$OUT/$1.log"; exit 1
}
run_bench() { # $1 side
  "$OUT/epbench" -kubeconfig "$OUT/data-$1/kubeconfig" -services "$SERVICES" -endpoints "$ENDPOINTS" \
    -samples "$SAMPLES" -rate "$RATE" -label "$1" 2> >(sed "s/^/[$1] /" >&2) | tee -a "$OUT/results.jsonl"
}

if [[ $ONLY != peer ]]; then
  echo "== kube: Kube's endpointslice-controller" >&2
  start_kube kube endpointslice-controller
  run_bench kube
  stop_all
fi
if [[ $ONLY != kube ]]; then
  echo "== peer: kube-controller-manager v1.37.2 endpointslice-controller" >&2
  start_kube peer -endpointslice-controller # every cluster controller off
  (cd "$OUT" && ./kube certs user system:kube-controller-manager --data-dir data-peer -o kcm.kubeconfig >/dev/null)
  P=$OUT/data-peer/pki
  # shellcheck disable=SC2086
  "$BIN/kube-controller-manager" --kubeconfig="$OUT/kcm.kubeconfig" --authentication-kubeconfig="$OUT/kcm.kubeconfig" \
    --authorization-kubeconfig="$OUT/kcm.kubeconfig" --bind-address=127.0.0.1 --secure-port=10357 \
    --use-service-account-credentials=true --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --controllers=endpointslice-controller ${KCM_ARGS:-} >"$OUT/kcm.log" 2>&1 &
  pids+=($!)
  run_bench peer
  stop_all
fi
echo "results: $OUT/results.jsonl" >&2
