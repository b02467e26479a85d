#!/usr/bin/env bash
# ceiling.sh — the transport ceiling of the store-ratio goals of bench/README.md, side by side:
#   bench/apibench (configmaps) and bench/crdbench P2 (custom resource creates) against Kube's
#   store alone (-store: embedded etcd, no HTTP) and against bench/nullserver (HTTPS + HTTP/2
#   with a client certificate, no work behind it), alternating, ROUNDS times. Prints
#   null ÷ store beside the ratio each goal needs, and the CPU time of each process.
# Usage: bench/ceiling.sh. Env: ROUNDS (3), N (2000), LISTS (200), CLIENTS (8,64), CRS (10000),
# CR_CLIENTS (8).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}; N=${N:-2000}; LISTS=${LISTS:-200}; CLIENTS=${CLIENTS:-8,64}
CRS=${CRS:-10000}; CR_CLIENTS=${CR_CLIENTS:-8}
OUT=$(mktemp -d /tmp/kube-ceiling.XXXXXX)
for p in nullserver apibench crdbench; do go build -o "$OUT/$p" ./bench/$p; done
PORT=26843
results=$OUT/results.jsonl

"$OUT/nullserver" -port $PORT -kubeconfig "$OUT/null.kubeconfig" > "$OUT/nullserver.log" 2>&1 &
null_pid=$!
trap 'kill $null_pid 2>/dev/null; wait $null_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -qx ready "$OUT/nullserver.log" && break; sleep 0.1; done
grep -qx ready "$OUT/nullserver.log" || { echo "nullserver did not get ready" >&2; exit 1; }
ticks=$(getconf CLK_TCK)
server_cpu() { awk -v t="$ticks" '{print ($14+$15)/t}' /proc/$null_pid/stat; }

# run ROUND BENCH TARGET ARGS...: one client run; its JSON lines and one line of CPU times
# (the client process's, and for the null runs the server's over the same interval).
run() {
  local round=$1 bench=$2 target=$3; shift 3
  local before server=0 wall user sys
  before=$(server_cpu)
  /usr/bin/time -f '%e %U %S' -o "$OUT/time" "$OUT/$bench" -name "$target" "$@" > "$OUT/run.jsonl" 2>> "$OUT/$bench-$target.log"
  [[ $target == null ]] && server=$(awk -v a="$(server_cpu)" -v b="$before" 'BEGIN{print a-b}')
  sed "s/^{/{\"round\":$round,\"bench\":\"$bench\",/" "$OUT/run.jsonl" >> "$results"
  read -r wall user sys < "$OUT/time"
  echo "{\"round\":$round,\"bench\":\"$bench\",\"target\":\"$target\",\"op\":\"cpu\",\"wall_s\":$wall,\"client_cpu_s\":$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}'),\"server_cpu_s\":$server}" >> "$results"
  echo "round $round: $bench $target ${wall}s" >&2
}

for round in $(seq "$ROUNDS"); do
  targets="store null"; (( round % 2 == 0 )) && targets="null store"
  for t in $targets; do
    if [[ $t == store ]]; then run "$round" apibench store -store -clients "$CLIENTS" -n "$N" -lists "$LISTS"
    else run "$round" apibench null -kubeconfig "$OUT/null.kubeconfig" -clients "$CLIENTS" -n "$N" -lists "$LISTS"; fi
  done
  for t in $targets; do
    if [[ $t == store ]]; then run "$round" crdbench store -store -crs "$CRS" -clients "$CR_CLIENTS"
    else run "$round" crdbench null -kubeconfig "$OUT/null.kubeconfig" -crs "$CRS" -clients "$CR_CLIENTS"; fi
  done
done
if grep -q 'not served' "$OUT/nullserver.log"; then grep 'not served' "$OUT/nullserver.log" >&2; fi

python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rates, cpus = [r for r in rows if r["op"] != "cpu"], [r for r in rows if r["op"] == "cpu"]
med = statistics.median
need = {"p2": 0.7}  # configmap ops: API ≥ store ÷ 1.5
print("| op | clients | store/s | null server/s | null ÷ store | rounds at or above the goal | goal needs |")
print("| --- | --- | --- | --- | --- | --- | --- |")
keys = sorted({(r["op"], r["clients"]) for r in rates}, key=lambda k: (k[0] == "p2", k[1], k[0]))
for op, c in keys:
    rate = {t: {r["round"]: r["rate"] for r in rates if (r["op"], r["clients"], r["target"]) == (op, c, t)} for t in ("store", "null")}
    ratios = [rate["null"][i] / rate["store"][i] for i in rate["store"] if i in rate["null"]]
    name, goal = "CR create (P2)" if op == "p2" else op, need.get(op, 1 / 1.5)
    print(f"| {name} | {c} | {med(rate['store'].values()):,.0f} | {med(rate['null'].values()):,.0f} | "
          f"{med(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) | {sum(x >= goal for x in ratios)} of {len(ratios)} | ≥ {goal:.2f} |")
print("\nstore/s and null server/s: median of the rounds; null ÷ store: median (range) of the per-round ratios.")

print("\n| run | round | wall (s) | client CPU (s) | null server CPU (s) | CPU µs per request, client + server | share of 2 cores, client + server |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for r in cpus:
    # Requests: the timed operations, plus the 500 list objects per concurrency apibench creates
    # first (and its 2 namespaces, through the API), and crdbench's CRD and dry-run create.
    ops = [x for x in rates if (x["round"], x["bench"], x["target"]) == (r["round"], r["bench"], r["target"])]
    api = r["target"] == "null"
    extra = (502 if api else 500) * len({x["clients"] for x in ops}) if r["bench"] == "apibench" else (2 if api else 0)
    reqs = sum(x["n"] for x in ops) + extra
    c, s = r["client_cpu_s"], r["server_cpu_s"]
    sv = f"{s:.2f}" if api else "–"
    per = f"{c / reqs * 1e6:.0f} + {s / reqs * 1e6:.0f}" if api else f"{c / reqs * 1e6:.0f} (client loop + etcd)"
    print(f"| {r['bench']} {r['target']} | {r['round']} | {r['wall_s']:.2f} | {c:.2f} | {sv} | {per} | {(c + s) / r['wall_s'] / 2:.0%} |")
print("\nwall and client CPU: the whole client process, start-up included (the store runs start an etcd member).")
PY
echo "raw results: $results" >&2
