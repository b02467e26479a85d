#!/usr/bin/env bash
# bench/agent/startup.sh — pod startup (create → Ready) through `kube server --agent` on this
# machine: N busybox pods (sleep) created at once, then one by one; prints p50/p99 in ms from
# each pod's creationTimestamp to its Ready condition (both as the API server records them,
# 1 s resolution, so figures are whole seconds).
#
# Usage: bench/agent/startup.sh [N]   (default 30; run as root; needs containerd, runc,
#        /usr/lib/cni and busybox-static). Uses bridge kubebench0, pod CIDR 10.236.0.0/24.
set -euo pipefail
N=${1:-30}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/kube-agent-bench.XXXXXX)
PORT=${PORT:-16543}
cleanup() {
  sock=$W/data/agent/containerd/containerd.sock
  if [ -S "$sock" ]; then
    for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 1
    for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true; done
    for c in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  [ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null || true
  pid=$(cat "$W/data/agent/containerd/containerd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  grep " $W/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  ip link del kubebench0 2>/dev/null || true
  ip route del unreachable 10.236.0.0/24 metric 4000 2>/dev/null || true
  sysctl -qw net.ipv4.ip_forward="$FWD"
  rm -rf "$W"
}
FWD=$(sysctl -n net.ipv4.ip_forward)
trap cleanup EXIT

(cd "$ROOT" && go build -o "$W/kube" ./cmd/kube)
# busybox OCI image: one uncompressed layer (as ../shared/peers/run-kubelet.sh builds it)
mkdir -p "$W/img/root/bin" "$W/img/oci/blobs/sha256"
cp /bin/busybox "$W/img/root/bin/busybox"; ln -s busybox "$W/img/root/bin/sh"; ln -s busybox "$W/img/root/bin/sleep"
tar -C "$W/img/root" --owner=0 --group=0 --numeric-owner --sort=name --mtime=@0 -cf "$W/img/layer.tar" .
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); mv "$1" "$W/img/oci/blobs/sha256/$d"; echo "$d $(stat -c %s "$W/img/oci/blobs/sha256/$d")"; }
read -r ld ls < <(blob "$W/img/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$ld" >"$W/img/c.json"
read -r cd cs < <(blob "$W/img/c.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd" "$cs" "$ld" "$ls" >"$W/img/m.json"
read -r md ms < <(blob "$W/img/m.json")
printf '{"imageLayoutVersion":"1.0.0"}' >"$W/img/oci/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"kube.local/busybox:1","org.opencontainers.image.ref.name":"1"}}]}' "$md" "$ms" >"$W/img/oci/index.json"
mkdir -p "$W/images"; tar -C "$W/img/oci" -cf "$W/images/busybox.tar" oci-layout index.json blobs
echo "nameserver 127.0.0.1" >"$W/resolv.conf"

"$W/kube" server --data-dir "$W/data" --secure-port "$PORT" --agent --agent-port 0 --agent-node-name bench-node \
  --agent-bridge kubebench0 --cluster-cidr 10.236.0.0/24 --node-cidr-mask-size 24 --agent-image-dir "$W/images" \
  --agent-containerd-proxy http://127.0.0.1:9 --agent-resolv-conf "$W/resolv.conf" >"$W/server.out" 2>"$W/server.log" &
SPID=$!
export KUBECONFIG=$W/data/kubeconfig
for _ in $(seq 120); do kubectl get node bench-node -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True && break; sleep 0.5; done

pod() { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n  nodeName: bench-node\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 1\n  containers: [{name: c, image: kube.local/busybox:1, imagePullPolicy: Never, command: [sleep, "100000"]}]\n---\n' "$1" "$2"; }
measure() {
  local ns=$1
  for _ in $(seq 600); do
    r=$(kubectl get pods -n "$ns" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
    [ "$r" -ge "$N" ] && break; sleep 0.5
  done
  kubectl get pods -n "$ns" -o json | python3 -c '
import json,sys,datetime
p=lambda s: datetime.datetime.strptime(s,"%Y-%m-%dT%H:%M:%SZ")
d=sorted((p([c for c in i["status"]["conditions"] if c["type"]=="Ready"][0]["lastTransitionTime"])-p(i["metadata"]["creationTimestamp"])).total_seconds()*1000 for i in json.load(sys.stdin)["items"])
q=lambda f: d[min(len(d)-1,int(f*len(d)))]
print("pods %d  p50 %d ms  p99 %d ms  max %d ms" % (len(d), q(0.5), q(0.99), d[-1]))'
}
kubectl create ns batch >/dev/null; kubectl create ns serial >/dev/null
echo "== $N pods created at once"
for i in $(seq "$N"); do pod "p$i" batch; done | kubectl apply -f - >/dev/null
measure batch
echo "== $N pods one by one (each after the previous is Ready)"
for i in $(seq "$N"); do
  pod "s$i" serial | kubectl apply -f - >/dev/null
  kubectl wait -n serial --for=condition=Ready "pod/s$i" --timeout=60s >/dev/null
done
measure serial
echo "agent RSS/CPU: the agent shares the server's process here (kube server --agent)"
kubectl delete ns batch serial --wait=true --timeout=120s >/dev/null || true
