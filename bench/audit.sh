#!/usr/bin/env bash
# audit.sh — overhead of the audit log at Metadata level on the API benchmark (bench/apibench:
# configmap create / get / list / update through a kubeconfig), the same server binary run
# without and with --audit-policy-file, alternately ROUNDS times on fresh data directories.
# Usage: bench/audit.sh   Env: N (ops per phase, 2000), LISTS (200), CLIENTS (8,64), ROUNDS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}; LISTS=${LISTS:-200}; CLIENTS=${CLIENTS:-8,64}; ROUNDS=${ROUNDS:-2}
OUT=$(mktemp -d /tmp/kube-auditbench.XXXXXX)
go build -o "$OUT/kube" ./cmd/kube
go build -o "$OUT/apibench" ./bench/apibench
PORT=26643
cat > "$OUT/policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
YAML
results=$OUT/results.jsonl
run() { # name, extra flags...
  local name=$1; shift
  rm -rf "$OUT/d"
  "$OUT/kube" server --data-dir "$OUT/d" --secure-port $PORT "$@" > "$OUT/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 200); do curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:$PORT/readyz | grep -q 200 && break; sleep 0.1; done
  "$OUT/apibench" -kubeconfig "$OUT/d/kubeconfig" -name "$name" -clients "$CLIENTS" -n "$N" -lists "$LISTS" >> "$results"
  kill $pid; wait $pid || true
}
for _ in $(seq "$ROUNDS"); do
  run plain
  run audit --audit-policy-file "$OUT/policy.yaml" --audit-log-path "$OUT/audit.log" --audit-log-maxsize 100 --audit-log-maxbackup 2
done
python3 - "$results" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
acc = collections.defaultdict(list)
for r in rows:
    acc[(r["target"], r["op"], r["clients"])].append(r)
print("| op | clients | no audit /s (p99 ms) | audit Metadata /s (p99 ms) | overhead |")
print("| --- | --- | --- | --- | --- |")
for (t, op, c) in sorted({k for k in acc if k[0] == "plain"}, key=lambda k: (k[2], k[1])):
    p, a = acc[("plain", op, c)], acc[("audit", op, c)]
    pr = sum(x["rate"] for x in p)/len(p); ar = sum(x["rate"] for x in a)/len(a)
    pp = sum(x["p99_ms"] for x in p)/len(p); ap = sum(x["p99_ms"] for x in a)/len(a)
    print(f"| {op} | {c} | {pr:.0f} ({pp:.1f}) | {ar:.0f} ({ap:.1f}) | {100*(pr-ar)/pr:+.1f} % |")
PY
echo "raw results: $results; audit log: $(wc -l < "$OUT/audit.log") lines" >&2
