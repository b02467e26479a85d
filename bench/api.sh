#!/usr/bin/env bash
# api.sh — the API-server benchmark of bench/README.md, side by side in one run:
#   1. cold start to /readyz and idle RSS: Kube (fresh data dir, then restart) and kube-apiserver
#   2. configmap create / get / list(500) / update at 8 and 64 clients: Kube's store alone on an
#      embedded etcd, Kube's API, and kube-apiserver v1.37.2 on its own etcd.
# Needs the peers built: ../shared/peers/build.sh $PEERS and build-kube-apiserver.sh $PEERS.
# Usage: bench/api.sh [PEERS_DIR]   (default /work/peers-bin). Env: N (ops per phase, 6000),
# LISTS (list ops per phase, 600), CLIENTS (8,64). Beside each rate: the server's CPU per
# operation (Kube's one process with its embedded etcd; kube-apiserver plus its etcd).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${1:-/work/peers-bin}
N=${N:-6000}; LISTS=${LISTS:-600}; CLIENTS=${CLIENTS:-8,64}
OUT=$(mktemp -d /tmp/kube-apibench.XXXXXX)
# Built, then copied as an install would: a binary the linker has just written maps 5–10 MB more
# of its file at start than the same bytes read from disk or copied (bench/README.md, API server).
go build -o "$OUT/kube.linked" ./cmd/kube && cp "$OUT/kube.linked" "$OUT/kube"
go build -o "$OUT/apibench" ./bench/apibench
go build -o "$OUT/coldstart" ./bench/coldstart
KPORT=26543
results=$OUT/results.jsonl

echo "== cold start" >&2
"$OUT/coldstart" -name kube-first-start -url https://127.0.0.1:$KPORT/readyz -- "$OUT/kube" server --data-dir "$OUT/kd" --secure-port $KPORT >> "$results"
"$OUT/coldstart" -name kube-restart -url https://127.0.0.1:$KPORT/readyz -- "$OUT/kube" server --data-dir "$OUT/kd" --secure-port $KPORT >> "$results"
export ETCD_BIN=$PEERS/etcd KAPI_STATE=$OUT/kapi
start=$(date +%s.%N)
../shared/peers/run-kube-apiserver.sh "$OUT/kapi.kubeconfig" "$PEERS" >&2
ready=$(echo "$(date +%s.%N) - $start" | bc)
sleep 5
kpid=$(awk '$1=="kube-apiserver"{print $2}' "$OUT/kapi/pids")
rss=$(awk '/VmRSS/{print $2/1024}' /proc/$kpid/status)
echo "{\"target\":\"kube-apiserver\",\"ready_s\":$ready,\"idle_rss_mb\":$rss,\"note\":\"ready includes its etcd start and cert generation by the script; RSS of kube-apiserver alone (etcd is a separate process)\"}" >> "$results"

echo "== requests" >&2
"$OUT/apibench" -store -name store -clients "$CLIENTS" -n "$N" -lists "$LISTS" >> "$results" 2>/dev/null
"$OUT/kube" server --data-dir "$OUT/kd" --secure-port $KPORT > "$OUT/kube.log" 2>&1 &
kube_pid=$!
trap 'kill $kube_pid 2>/dev/null; ../shared/peers/run-kube-apiserver.sh stop >/dev/null 2>&1 || true' EXIT
for _ in $(seq 100); do curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$KPORT/readyz | grep -q 200 && break; sleep 0.1; done
"$OUT/apibench" -kubeconfig "$OUT/kd/kubeconfig" -name kube -clients "$CLIENTS" -n "$N" -lists "$LISTS" -pids $kube_pid >> "$results"
kapi_pids=$(awk '$1=="kube-apiserver"||$1=="etcd"{printf "%s%s", sep, $2; sep=","}' "$OUT/kapi/pids")
"$OUT/apibench" -kubeconfig "$OUT/kapi.kubeconfig" -name kube-apiserver -clients "$CLIENTS" -n "$N" -lists "$LISTS" -pids "$kapi_pids" >> "$results"

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| start | ready (s) | idle RSS (MB) |\n| --- | --- | --- |")
for r in rows:
    if "ready_s" in r:
        print(f"| {r['target']} | {r['ready_s']:.2f} | {r['idle_rss_mb']:.0f} |")
reqs = {(r["target"], r["op"], r["clients"]): r for r in rows if "op" in r}
print("\n| op | clients | store/s | kube/s (p99 ms) | kube-apiserver/s (p99 ms) | API cost vs store | kube ÷ kube-apiserver | server CPU ms/op kube / kube-apiserver (ratio) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for (t, op, c), r in sorted(reqs.items(), key=lambda x: (x[0][2], x[0][1])):
    if t != "kube": continue
    s, k = reqs.get(("store", op, c)), reqs.get(("kube-apiserver", op, c))
    print(f"| {op} | {c} | {s['rate']:.0f} | {r['rate']:.0f} ({r['p99_ms']:.1f}) | {k['rate']:.0f} ({k['p99_ms']:.1f}) | {s['rate']/r['rate']:.2f}× | {r['rate']/k['rate']:.2f}× | {r['server_cpu_ms']:.3f} / {k['server_cpu_ms']:.3f} ({r['server_cpu_ms']/k['server_cpu_ms']:.2f}×) |")
PY
echo "raw results: $results" >&2
