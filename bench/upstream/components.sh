#!/usr/bin/env bash
# components.sh — the real kube-scheduler, kube-controller-manager and kubelet v1.37.2 against
# `kube server`, each with its own credentials, then a Deployment that they schedule, start
# and serve logs and exec for. Prints every distinct error line of their logs.
#
# Usage: bench/upstream/components.sh [PEERS_BIN]   (default /work/peers-bin, built by
#        ../shared/peers/build-k8s.sh; the kubelet part needs containerd, runc,
#        containernetworking-plugins and busybox-static from Debian)
#        bench/upstream/components.sh stop
#
# Identities: kube-scheduler as system:kube-scheduler, kube-controller-manager as
# system:kube-controller-manager with --use-service-account-credentials (one service account
# per controller, as kubeadm runs it), the kubelet as system:node:$NODE in system:nodes (the
# Node authorizer and NodeRestriction decide for it). Kube runs with
# --kubelet-preferred-address-types=Hostname because run-kubelet.sh's kubelet listens on
# 127.0.0.1 while its InternalIP is the default-route address (see that script's header).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEERS=/work/shared/peers
STATE=${STATE:-/tmp/kube-components}
NODE=${NODE_NAME:-$(hostname)}
PORT=${PORT:-16443}

stop() {
  KUBELET_STATE=$STATE/kubelet bash "$PEERS/run-kubelet.sh" stop >/dev/null 2>&1 || true
  for p in $STATE/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
  rm -f $STATE/*.pid
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi
BIN=${1:-/work/peers-bin}
stop
rm -rf "$STATE"; mkdir -p "$STATE"
go build -o "$STATE/kube" "$ROOT/cmd/kube"
"$STATE/kube" server --data-dir "$STATE/data" --secure-port "$PORT" --kubelet-preferred-address-types=Hostname >"$STATE/kube.log" 2>&1 &
echo $! >"$STATE/kube.pid"
for _ in $(seq 60); do grep -q "is ready" "$STATE/kube.log" && break; sleep 1; done
grep -q "is ready" "$STATE/kube.log" || { cat "$STATE/kube.log"; exit 1; }
export KUBECONFIG=$STATE/data/kubeconfig
P=$STATE/data/pki
cd "$STATE"
./kube certs user system:kube-scheduler --data-dir data -o sched.kubeconfig >/dev/null
./kube certs user system:kube-controller-manager --data-dir data -o kcm.kubeconfig >/dev/null
./kube certs user "system:node:$NODE" --group system:nodes --data-dir data -o node.kubeconfig >/dev/null
"$BIN/kube-scheduler" --kubeconfig=sched.kubeconfig --authentication-kubeconfig=sched.kubeconfig \
  --authorization-kubeconfig=sched.kubeconfig --bind-address=127.0.0.1 --secure-port=10259 >sched.log 2>&1 &
echo $! >sched.pid
"$BIN/kube-controller-manager" --kubeconfig=kcm.kubeconfig --authentication-kubeconfig=kcm.kubeconfig \
  --authorization-kubeconfig=kcm.kubeconfig --bind-address=127.0.0.1 --secure-port=10257 \
  --use-service-account-credentials=true --service-account-private-key-file=$P/sa.key --root-ca-file=$P/ca.crt \
  --cluster-signing-cert-file=$P/ca.crt --cluster-signing-key-file=$P/ca.key --controllers='*' \
  --cluster-cidr=10.244.0.0/16 --service-cluster-ip-range=10.96.0.0/12 >kcm.log 2>&1 &
echo $! >kcm.pid
KUBELET_STATE=$STATE/kubelet NODE_NAME=$NODE bash "$PEERS/run-kubelet.sh" "$STATE/node.kubeconfig" "$BIN" | tail -1
kubectl apply -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: bb}
spec:
  replicas: 2
  selector: {matchLabels: {app: bb}}
  template:
    metadata: {labels: {app: bb}}
    spec:
      containers:
      - {name: c, image: "k8s.local/busybox:1.35", imagePullPolicy: Never, command: ["sh", "-c", "echo hello from $HOSTNAME; sleep 3600"]}
YAML
kubectl rollout status deploy/bb --timeout=120s
kubectl get pods -o wide
pod=$(kubectl get pods -l app=bb -o name | head -1)
kubectl logs "$pod"
kubectl exec "$pod" -- sh -c 'echo exec ok'
kubectl delete "$pod" --timeout=60s
kubectl rollout status deploy/bb --timeout=120s
for f in sched.log kcm.log kubelet/kubelet.log; do
  echo "=== distinct error lines in $f"
  grep -E '^E' "$f" | sed -E 's/^E[0-9]+ [0-9:.]+ +[0-9]+ //' | cut -c1-200 | sort | uniq -c | sort -rn || true
done
