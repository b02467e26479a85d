#!/usr/bin/env bash
# crd.sh — the CRD benchmarks of bench/README.md ("CRDs"), side by side in one run:
#   P1  create N1 distinct CRDs with 8 clients: time to all Established, RSS afterwards;
#       then a cold `kubectl api-resources` (empty cache dir) with them installed
#   P2  create N2 custom resources of one CRD (schema + two CEL rules) with 8 clients
# on Kube (fresh data dir, embedded etcd), on upstream apiextensions-apiserver v0.37.2 (the
# apiextensions-discovery main of ../shared/peers on its own etcd, run-apiextensions.sh),
# and P2 on Kube's store alone (embedded etcd, no API). fsync is on everywhere.
# Then P1 with N1X CRDs on Kube alone.
# Usage: bench/crd.sh [PEERS_DIR]   (default /work/peers-bin). Env: N1 (5000), N2 (10000),
# N1X (10000; 0 skips), CLIENTS (8), KUBECTL (kubectl).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${1:-/work/peers-bin}
N1=${N1:-5000}; N2=${N2:-10000}; N1X=${N1X:-10000}; CLIENTS=${CLIENTS:-8}; KUBECTL=${KUBECTL:-kubectl}
OUT=$(mktemp -d /tmp/kube-crdbench.XXXXXX)
# Built, then copied as an install would: a binary the linker has just written maps 5–10 MB more
# of its file at start than the same bytes read from disk or copied (bench/README.md, API server).
go build -o "$OUT/kube.linked" ./cmd/kube && cp "$OUT/kube.linked" "$OUT/kube"
go build -o "$OUT/crdbench" ./bench/crdbench
KPORT=26643
results=$OUT/results.jsonl
kube_pid=
stop_all() {
  [[ -n $kube_pid ]] && { kill "$kube_pid" 2>/dev/null; wait "$kube_pid" 2>/dev/null || true; }
  kube_pid=
  PEERS_STATE=$OUT/peer ../shared/peers/run-apiextensions.sh stop >/dev/null 2>&1 || true
}
trap stop_all EXIT
start_kube() { # $1 data dir
  "$OUT/kube" server --data-dir "$1" --secure-port $KPORT --log-level error > "$OUT/kube.log" 2>&1 &
  kube_pid=$!
  for _ in $(seq 300); do curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$KPORT/readyz | grep -q 200 && return; sleep 0.1; done
  echo "kube did not get ready" >&2; exit 1
}

echo "== Kube: P1 ($N1 CRDs), api-resources, P2 ($N2 CRs)" >&2
start_kube "$OUT/kd"
"$OUT/crdbench" -kubeconfig "$OUT/kd/kubeconfig" -name kube -pids $kube_pid -crds "$N1" -kubectl "$KUBECTL" -crs "$N2" -clients "$CLIENTS" | tee -a "$results" >&2
stop_all

echo "== apiextensions-apiserver: P1, api-resources, P2" >&2
export PEERS_STATE=$OUT/peer
../shared/peers/run-apiextensions.sh "$OUT/peer.kubeconfig" "$PEERS" >&2
ppids="$(cat "$OUT/peer/apiserver.pid"),$(cat "$OUT/peer/etcd.pid")"
"$OUT/crdbench" -kubeconfig "$OUT/peer.kubeconfig" -name peer -pids "$(cat "$OUT/peer/apiserver.pid")" -crds "$N1" -kubectl "$KUBECTL" -clients "$CLIENTS" | tee -a "$results" >&2
echo "{\"target\":\"peer+etcd\",\"op\":\"rss\",\"rss_mb\":$(awk '/VmRSS/{s+=$2} END{print s/1024}' /proc/${ppids%,*}/status /proc/${ppids#*,}/status)}" | tee -a "$results" >&2
"$OUT/crdbench" -kubeconfig "$OUT/peer.kubeconfig" -name peer -crs "$N2" -clients "$CLIENTS" | tee -a "$results" >&2
stop_all
unset PEERS_STATE

echo "== Kube's store: P2" >&2
"$OUT/crdbench" -store -name store -crs "$N2" -clients "$CLIENTS" | tee -a "$results" >&2

if [[ $N1X -gt 0 ]]; then
  echo "== Kube: P1 ($N1X CRDs), api-resources" >&2
  start_kube "$OUT/kd2"
  "$OUT/crdbench" -kubeconfig "$OUT/kd2/kubeconfig" -name kube-x -pids $kube_pid -crds "$N1X" -kubectl "$KUBECTL" -clients "$CLIENTS" | tee -a "$results" >&2
  stop_all
fi

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def get(t, op):
    return next((r for r in rows if r["target"] == t and r["op"] == op), None)
k, p, kx = get("kube", "p1"), get("peer", "p1"), get("kube-x", "p1")
pe = get("peer+etcd", "rss")
print("| P1 | CRDs | all created (s) | all Established (s) | after the last create (s) | RSS after (MB) |")
print("| --- | --- | --- | --- | --- | --- |")
for name, r in (("Kube", k), ("apiextensions-apiserver", p), ("Kube", kx)):
    if r:
        print(f"| {name} | {r['n']} | {r['created_s']:.1f} | {r['established_s']:.1f} | {r['after_last_create_s']:.2f} | {r['rss_mb']:.0f} |")
if k and p:
    print(f"\nP1 ratios (apiextensions-apiserver ÷ Kube): time to all Established {p['established_s']/k['established_s']:.1f}×, "
          f"after the last create {p['after_last_create_s']/max(k['after_last_create_s'],0.001):.1f}×, "
          f"RSS {p['rss_mb']/k['rss_mb']:.1f}× (peer apiserver alone; with its etcd {pe['rss_mb'] if pe else 0:.0f} MB: {(pe['rss_mb'] if pe else 0)/k['rss_mb']:.1f}×)")
print("\n| cold kubectl api-resources | resources | seconds (3 runs) | median |\n| --- | --- | --- | --- |")
for t in ("kube", "peer", "kube-x"):
    runs = [r for r in rows if r["target"] == t and r["op"] == "api-resources"]
    if runs:
        secs = sorted(r["seconds"] for r in runs)
        print(f"| {t} | {runs[0]['n']} | {' / '.join(f'{x:.2f}' for x in secs)} | {secs[len(secs)//2]:.2f} |")
k2, p2, s2 = get("kube", "p2"), get("peer", "p2"), get("store", "p2")
print("\n| P2 | CRs | creates/s | errors |\n| --- | --- | --- | --- |")
for t, r in (("Kube", k2), ("apiextensions-apiserver", p2), ("Kube's store", s2)):
    if r:
        print(f"| {t} | {r['n']} | {r['rate']:.0f} | {r.get('errors', 0)} |")
if k2 and p2 and s2:
    print(f"\nP2 ratios: Kube ÷ apiextensions-apiserver {k2['rate']/p2['rate']:.2f}×, Kube ÷ store {k2['rate']/s2['rate']:.2f}×")
PY
echo "raw results: $results" >&2
