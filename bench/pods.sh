#!/usr/bin/env bash
# pods.sh — the workload API benchmark of bench/README.md ("Workload API"), side by side in one
# run, with bench/podbench as the client:
#   create  N pods (scheduler_perf's pod-default) by WRITERS client-go writers: rate, server CPU
#           per create, server RSS with the pods stored
#   watch   WATCHERS node watchers (fieldSelector=spec.nodeName=node-<i>) over BOUND bound pods
#           while UPDATES pod status updates/s flow for DURATION: delivery p50/p99, server CPU
#           per delivered event
# on Kube (`kube server --etcd-servers` on an etcd of its own, so that its RSS and CPU exclude
# etcd, as the peer's do) and on kube-apiserver v1.37.2 (../shared/peers/run-kube-apiserver.sh,
# its own etcd). Both etcds are the peers' etcd binary with fsync on.
# Needs the peers built: ../shared/peers/build-k8s.sh PEERS_DIR (kube-apiserver and etcd).
# Usage: bench/pods.sh [PEERS_DIR]   (default /work/peers-bin). Env: N (100000), WRITERS (8),
# WATCHERS (5000), BOUND (10000), UPDATES (500), DURATION (30s), ONLY (kube|peer: one side).
# KUBE_BIN: a kube binary to run instead of building ./cmd/kube.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${1:-/work/peers-bin}
N=${N:-100000}; WRITERS=${WRITERS:-8}; WATCHERS=${WATCHERS:-5000}; BOUND=${BOUND:-10000}
UPDATES=${UPDATES:-500}; DURATION=${DURATION:-30s}; ONLY=${ONLY:-}
OUT=$(mktemp -d /tmp/kube-podbench.XXXXXX)
# Built, then copied as an install would (bench/README.md, API server).
if [[ -n ${KUBE_BIN:-} ]]; then cp "$KUBE_BIN" "$OUT/kube"; else go build -o "$OUT/kube.linked" ./cmd/kube && cp "$OUT/kube.linked" "$OUT/kube"; fi
go build -o "$OUT/podbench" ./bench/podbench
KPORT=26743; KETCD=27379
results=$OUT/results.jsonl
ARGS=(-pods "$N" -writers "$WRITERS" -watchers "$WATCHERS" -bound-pods "$BOUND" -updates "$UPDATES" -duration "$DURATION")
kube_pid=; etcd_pid=
stop_all() {
  [[ -n $kube_pid ]] && { kill "$kube_pid" 2>/dev/null || true; wait "$kube_pid" 2>/dev/null || true; }
  [[ -n $etcd_pid ]] && { kill "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; }
  kube_pid=; etcd_pid=
  KAPI_STATE=$OUT/kapi ../shared/peers/run-kube-apiserver.sh stop >/dev/null 2>&1 || true
  # The stores of 100,000 pods are ~1 GB each: only the results and logs stay.
  rm -rf "$OUT/ketcd" "$OUT/kd" "$OUT/kapi/etcd-data"
}
trap stop_all EXIT

if [[ $ONLY != peer ]]; then
  echo "== Kube (etcd of its own on 127.0.0.1:$KETCD)" >&2
  curl -sf "http://127.0.0.1:$KETCD/health" >/dev/null 2>&1 && { echo "something already serves 127.0.0.1:$KETCD" >&2; exit 1; }
  "$PEERS/etcd" -data-dir "$OUT/ketcd" -listen-client "http://127.0.0.1:$KETCD" -listen-peer "http://127.0.0.1:$((KETCD+1))" -log-level warn > "$OUT/ketcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$KETCD/health" >/dev/null 2>&1 && break; sleep 0.2; done
  kill -0 $etcd_pid 2>/dev/null || { echo "etcd did not start; tail of $OUT/ketcd.log:" >&2; tail -3 "$OUT/ketcd.log" >&2; exit 1; }
  # The API server alone, as the peer: kube-apiserver runs no scheduler and no controllers.
  # With them, Kube's scheduler writes a PodScheduled=False status and a FailedScheduling
  # event for every create of a pod no node can take (three writes per create, 3× the CPU
  # in a run of 3,000), and its pod garbage collector deletes the watch phase's pods, bound
  # to nodes that do not exist.
  "$OUT/kube" server --data-dir "$OUT/kd" --secure-port $KPORT --etcd-servers "http://127.0.0.1:$KETCD" --log-level error \
    --scheduler=false --disable-workload-controllers --cluster-controllers=-pod-garbage-collector > "$OUT/kube.log" 2>&1 &
  kube_pid=$!
  ready=0
  for _ in $(seq 600); do
    kill -0 $kube_pid 2>/dev/null || break
    curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$KPORT/readyz | grep -q 200 && { ready=1; break; }
    sleep 0.1
  done
  [[ $ready = 1 ]] || { echo "kube did not get ready; tail of $OUT/kube.log:" >&2; tail -5 "$OUT/kube.log" >&2; exit 1; }
  "$OUT/podbench" -kubeconfig "$OUT/kd/kubeconfig" -name kube -pid $kube_pid "${ARGS[@]}" | tee -a "$results" >&2
  stop_all
fi

if [[ $ONLY != kube ]]; then
  echo "== kube-apiserver v1.37.2" >&2
  export ETCD_BIN=$PEERS/etcd KAPI_STATE=$OUT/kapi
  ../shared/peers/run-kube-apiserver.sh "$OUT/kapi.kubeconfig" "$PEERS" >&2
  kpid=$(awk '$1=="kube-apiserver"{print $2}' "$OUT/kapi/pids")
  "$OUT/podbench" -kubeconfig "$OUT/kapi.kubeconfig" -name kube-apiserver -pid "$kpid" "${ARGS[@]}" | tee -a "$results" >&2
  stop_all
fi

UPDATES=$UPDATES python3 - "$results" <<'PY'
import json, os, sys
UPDATES = os.environ.get('UPDATES', '?')
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def get(t, op):
    return next((r for r in rows if r["target"] == t and r["op"] == op), None)
def ratio(a, b):
    return f"{a/b:.2f}×" if a and b else "–"
k, p = "kube", "kube-apiserver"
kc, pc = get(k, "create"), get(p, "create")
if kc or pc:
    print("| create | pods | creates/s | p50 / p99 ms | server CPU ms per create | errors | RSS with the pods stored (MB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r, rs in ((k, kc, get(k, "rss-stored")), (p, pc, get(p, "rss-stored"))):
        if r:
            print(f"| {name} | {r['n']} | {r['rate']:.0f} | {r['p50_ms']:.1f} / {r['p99_ms']:.1f} | {r.get('cpu_ms_per_op', 0):.2f} | {r.get('errors', 0)} | {rs['rss_mb'] if rs else 0:.0f} |")
    if kc and pc:
        krs, prs = get(k, "rss-stored"), get(p, "rss-stored")
        print(f"\nKube ÷ kube-apiserver: create rate {ratio(kc['rate'], pc['rate'])}, CPU per create {ratio(kc.get('cpu_ms_per_op'), pc.get('cpu_ms_per_op'))}, "
              f"RSS {ratio(krs['rss_mb'] if krs else 0, prs['rss_mb'] if prs else 0)}")
kw, pw = get(k, "watch"), get(p, "watch")
if kw or pw:
    print("\n| watch | watchers ready (s) | RSS with watchers (MB) | updates/s: asked, sent alone / with watchers | PUT p99 alone (ms) | delivered | lost | delivery p50 / p99 / max (ms) | server CPU ms per update alone | per delivered event | watchers' share per event | errors |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    share = {}
    for name, r in ((k, kw), (p, pw)):
        if not r:
            continue
        rd, ra = get(name, "watchers-ready"), get(name, "updates-alone")
        alone = ra.get("cpu_ms_per_op", 0) if ra else 0
        # CPU the watchers added: all of the phase minus what the same updates cost alone.
        share[name] = (r.get("cpu_s", 0) * 1000 - alone * (r["n"] + r.get("lost", 0))) / max(r["n"], 1)
        print(f"| {name} | {rd['seconds'] if rd else 0:.1f} | {r['rss_mb']:.0f} | {UPDATES}, {ra['rate'] if ra else 0:.0f} / {r['rate']:.0f} | {ra['p99_ms'] if ra else 0:.1f} | {r['n']} | {r.get('lost', 0)} | "
              f"{r.get('p50_ms', 0):.1f} / {r.get('p99_ms', 0):.1f} / {r.get('max_ms', 0):.0f} | {alone:.3f} | {r.get('cpu_ms_per_op', 0):.3f} | {share[name]:.3f} | {r.get('errors', 0)} |")
    if kw and pw:
        print(f"\nKube ÷ kube-apiserver: delivery p99 {ratio(kw.get('p99_ms'), pw.get('p99_ms'))}, CPU per delivered event {ratio(kw.get('cpu_ms_per_op'), pw.get('cpu_ms_per_op'))}, "
              f"watchers' share of it {ratio(share.get(k), share.get(p))}")
for r in rows:
    if r.get("note", "").count("error"):
        print(f"\n{r['target']} {r['op']}: {r['note']}")
PY
echo "raw results: $results" >&2
