#!/usr/bin/env bash
# p2.sh — P2 of bench/README.md ("CRDs") alone, Kube and upstream apiextensions-apiserver
# alternated ROUNDS times on fresh servers, so that the ratio is read off pairs measured a
# minute apart rather than one pair of a long run (this machine's speed drifts by ±20 %).
# Usage: bench/p2.sh [PEERS_DIR] (default /work/peers-bin). Env: N2 (10000), ROUNDS (3),
# CLIENTS (8).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${1:-/work/peers-bin}
N2=${N2:-10000}; ROUNDS=${ROUNDS:-3}; CLIENTS=${CLIENTS:-8}
OUT=$(mktemp -d /tmp/kube-p2.XXXXXX)
go build -o "$OUT/kube.linked" ./cmd/kube && cp "$OUT/kube.linked" "$OUT/kube"
go build -o "$OUT/crdbench" ./bench/crdbench
KPORT=26644
kube_pid=
stop_all() {
  [[ -n $kube_pid ]] && { kill "$kube_pid" 2>/dev/null; wait "$kube_pid" 2>/dev/null || true; }
  kube_pid=
  PEERS_STATE=$OUT/peer ../shared/peers/run-apiextensions.sh stop >/dev/null 2>&1 || true
}
trap stop_all EXIT
rate() { python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["rate"]))'; }
echo "| round | Kube creates/s | apiextensions-apiserver creates/s | Kube ÷ peer |"
echo "| --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
  rm -rf "$OUT/kd"
  "$OUT/kube" server --data-dir "$OUT/kd" --secure-port $KPORT --log-level error > "$OUT/kube.log" 2>&1 &
  kube_pid=$!
  for _ in $(seq 300); do curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$KPORT/readyz | grep -q 200 && break; sleep 0.1; done
  k=$("$OUT/crdbench" -kubeconfig "$OUT/kd/kubeconfig" -name kube -crs "$N2" -clients "$CLIENTS" | rate)
  stop_all
  rm -rf "$OUT/peer"
  export PEERS_STATE=$OUT/peer
  ../shared/peers/run-apiextensions.sh "$OUT/peer.kubeconfig" "$PEERS" >/dev/null 2>&1
  p=$("$OUT/crdbench" -kubeconfig "$OUT/peer.kubeconfig" -name peer -crs "$N2" -clients "$CLIENTS" | rate)
  stop_all
  unset PEERS_STATE
  echo "| $r | $k | $p | $(python3 -c "print(f'{$k/$p:.2f}×')") |"
done
