#!/usr/bin/env bash
# run.sh kube|peer [FOCUS] — upstream's sig-api-machinery conformance suite (e2e.test v1.37.2) against
# Kube or against the upstream peer, on this machine, with the suite's own images built from source.
#
#   kube  `kube server --sim-nodes 2 --agent` built from this checkout: the in-process node agent runs the
#         suite's pods (webhooks, the sample API server) through its own containerd; sim-1 and sim-2 are
#         tainted NoSchedule so that those pods land on the real node.
#   peer  kube-apiserver + kube-controller-manager (every controller) + kube-scheduler + kubelet v1.37.2
#         (../../../shared/peers/run-kube-apiserver.sh and run-kubelet.sh), the same images.
#
# Steps: build the images if missing (images.sh) and, for kube, the binary (go build, nice 19); take the
# machine-wide bench lock; start the side; run ../../../shared/peers/run-conformance.sh (one process per
# test, FOCUS default '\[sig-api-machinery\].*\[Conformance\]'); stop the side and clean up (bridge,
# nftables tables, DNS link, routes, containerd and its shims, mounts). Prints the result directory and
# "N passed, N failed" last; results.tsv there holds one line per test.
#
# Both sides get the same two timing flags, because two tests wait for periodic work that upstream does
# every 5 minutes while run-conformance.sh gives each test 180 s:
#   --etcd-compaction-interval=$COMPACTION (30s)  chunking "continue … compacted away" polls until its
#       first page's revision is compacted (the compactor compacts to the revision it recorded one
#       interval earlier: at most two intervals)
#   --resource-quota-sync-period=$QUOTA_SYNC (30s)  ResourceQuota "should apply changes to a resourcequota
#       status" waits for the quota controller's full resync to reset a status it ignores as an update
# Runtimes started here get HTTP(S)_PROXY=http://127.0.0.1:9: no image pull leaves the machine.
#
# Environment (all optional):
#   WORK       state and results (default /tmp/kube-conformance): images/, kube/ or peer/, results/<side>-<time>/
#   E2E_BIN    e2e.test (default /work/peers-bin/e2e.test; ../../../shared/peers/build-k8s.sh builds it)
#   PEERS_BIN  kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd (default: E2E_BIN's dir)
#   KUBECTL    kubectl the suite shells out to (default PEERS_BIN/kubectl)
#   KUBE_BIN   a kube binary to use instead of building this checkout
#   LOCK       lock file held while the side runs (default /tmp/kube-bench.lock; empty: none)
#   PAR, TEST_TIMEOUT, TOTAL_TIMEOUT  passed to run-conformance.sh (defaults 2, 180, 3600)
#   KEEP=1     leave the side running after the suite (stop it with `run.sh stop kube|peer`)
# Also: run.sh start kube|peer (prints the kubeconfig), run.sh stop kube|peer.
# Needs root (bridge, nftables, containerd), openssl, ctr, python3, /bin/busybox.
set -euo pipefail
{
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PEERS=${PEERS:-$(cd "$REPO/../shared/peers" 2>/dev/null && pwd || echo /work/shared/peers)}
WORK=${WORK:-/tmp/kube-conformance}
E2E_BIN=${E2E_BIN:-/work/peers-bin/e2e.test}
PEERS_BIN=${PEERS_BIN:-$(dirname "$E2E_BIN")}
KUBECTL=${KUBECTL:-$PEERS_BIN/kubectl}
LOCK=${LOCK-/tmp/kube-bench.lock}
COMPACTION=${COMPACTION:-30s}
QUOTA_SYNC=${QUOTA_SYNC:-30s}
IMAGES=$WORK/images

# Kube: ports, names and CIDRs of its own, so that it runs beside other Kube servers on this machine.
K_STATE=$WORK/kube; K_PORT=16443; K_AGENT_PORT=10260; K_NODE=kconf-node; K_BRIDGE=kconf0
K_CLUSTER=10.248.0.0/16; K_SERVICES=10.249.0.0/16; K_SVC_TABLE=kconf-proxy; K_NP_TABLE=kconf-netpol; K_DNS=kconf-dns0
# peer: the same for the upstream components
P_STATE=$WORK/peer; P_ETCD=42379; P_ETCD_PEER=42380; P_PORT=46443; P_BRIDGE=kconfpeer0; P_PODS=10.247.0.0/24

log() { echo "run.sh: $*"; }
kc() { "$KUBECTL" --kubeconfig "$1" "${@:2}"; }

images() {
  local f missing=
  for f in pause agnhost sample-apiserver etcd; do [ -s "$IMAGES/$f.tar" ] || missing=1; done
  [ -z "$missing" ] && return 0
  log "building the suite's images into $IMAGES (images.sh)"
  nice -n 19 "$HERE/images.sh" "$IMAGES" "$WORK/images-build"
}

kube_bin() {
  if [ -n "${KUBE_BIN:-}" ]; then echo "$KUBE_BIN"; return; fi
  log "building kube from $REPO ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown))" >&2
  (cd "$REPO" && nice -n 19 go build -o "$WORK/kube" ./cmd/kube) >&2
  echo "$WORK/kube"
}

# --- kube ---
start_kube() { # BIN
  local bin=$1 kcfg=$K_STATE/data/kubeconfig i
  mkdir -p "$K_STATE"; rm -rf "$K_STATE/data"
  nohup "$bin" server --data-dir "$K_STATE/data" --bind-address 0.0.0.0 --secure-port "$K_PORT" \
    --etcd-compaction-interval "$COMPACTION" --resource-quota-sync-period "$QUOTA_SYNC" \
    --sim-nodes 2 --agent --agent-port "$K_AGENT_PORT" --agent-bridge "$K_BRIDGE" --agent-node-name "$K_NODE" \
    --cluster-cidr "$K_CLUSTER" --service-cluster-ip-range "$K_SERVICES" \
    --agent-services-table "$K_SVC_TABLE" --agent-network-policy-table "$K_NP_TABLE" --agent-dns-interface "$K_DNS" \
    --agent-dns-metrics-port -1 --agent-gateway=false --agent-containerd-proxy http://127.0.0.1:9 \
    --agent-image-dir "$IMAGES" --embedded-nats=false --embedded-s3=false >"$K_STATE/kube.log" 2>&1 &
  echo $! >"$K_STATE/pid"
  for i in $(seq 600); do
    kill -0 "$(cat "$K_STATE/pid")" 2>/dev/null || { tail -20 "$K_STATE/kube.log" >&2; log "kube server exited"; return 1; }
    [ -s "$kcfg" ] && kc "$kcfg" get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.5
  done
  for i in $(seq 360); do # the nodes register after readyz
    kc "$kcfg" get node "$K_NODE" sim-1 sim-2 >/dev/null 2>&1 && break
    sleep 0.5
  done
  kc "$kcfg" wait --for=condition=Ready "node/$K_NODE" node/sim-1 node/sim-2 --timeout=180s >/dev/null
  # the suite's pods must run on the real node
  kc "$kcfg" taint nodes sim-1 sim-2 kubeos.dev/simulated=true:NoSchedule --overwrite >/dev/null
  log "kube ready: $kcfg (pid $(cat "$K_STATE/pid"), $(kc "$kcfg" version 2>/dev/null | tail -1))" >&2
  KCFG=$kcfg
}

stop_kube() {
  local pid i bin=${KUBE_BIN:-$WORK/kube} p
  if [ -f "$K_STATE/pid" ]; then
    pid=$(cat "$K_STATE/pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"; for i in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
      log "stopped kube server ($pid)"
    fi
    rm -f "$K_STATE/pid"
  fi
  # containerd shims and containers the agent's containerd left (by pid: only those under our state dir)
  for p in $(pgrep -f "containerd.*$K_STATE/" || true); do [ "$p" != $$ ] && kill -9 "$p" 2>/dev/null || true; done
  [ -x "$bin" ] && "$bin" agent --cleanup --services-table "$K_SVC_TABLE" --network-policy-table "$K_NP_TABLE" \
    --dns-interface "$K_DNS" --cluster-cidr "$K_CLUSTER" --service-cidr "$K_SERVICES" >/dev/null 2>&1 || true
  ip link del "$K_BRIDGE" 2>/dev/null || true
  ip link del "$K_DNS" 2>/dev/null || true
  nft delete table ip "$K_SVC_TABLE" 2>/dev/null || true
  nft delete table ip "$K_NP_TABLE" 2>/dev/null || true
  { grep -o " $K_STATE/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

# --- peer ---
start_peer() {
  local P=$P_STATE/kapi/pki fp=$P_STATE/front-proxy
  mkdir -p "$fp"
  if [ ! -f "$fp/client.crt" ]; then # front-proxy CA and client, as kubeadm makes them
    openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=front-proxy-ca -keyout "$fp/ca.key" -out "$fp/ca.crt" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$fp/client.ext"
    openssl req -newkey rsa:2048 -nodes -subj /CN=front-proxy-client -keyout "$fp/client.key" -out "$fp/client.csr" 2>/dev/null
    openssl x509 -req -in "$fp/client.csr" -CA "$fp/ca.crt" -CAkey "$fp/ca.key" -CAcreateserial -days 365 \
      -extfile "$fp/client.ext" -out "$fp/client.crt" 2>/dev/null
  fi
  KCFG=$P_STATE/kubeconfig
  KAPI_STATE=$P_STATE/kapi ETCD_PORT=$P_ETCD ETCD_PEER_PORT=$P_ETCD_PEER APISERVER_PORT=$P_PORT WITH_SCHEDULER=1 \
  APISERVER_EXTRA_ARGS="--etcd-compaction-interval=$COMPACTION --kubelet-preferred-address-types=Hostname --enable-aggregator-routing=true --requestheader-client-ca-file=$fp/ca.crt --requestheader-allowed-names=front-proxy-client --requestheader-extra-headers-prefix=X-Remote-Extra- --requestheader-group-headers=X-Remote-Group --requestheader-username-headers=X-Remote-User --proxy-client-cert-file=$fp/client.crt --proxy-client-key-file=$fp/client.key" \
    "$PEERS/run-kube-apiserver.sh" "$KCFG" "$PEERS_BIN" >&2
  # kube-controller-manager started here rather than by WITH_KCM=1: it needs --resource-quota-sync-period
  nohup "$PEERS_BIN/kube-controller-manager" --kubeconfig="$KCFG" --controllers='*' \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 --resource-quota-sync-period="$QUOTA_SYNC" \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
    >"$P_STATE/kube-controller-manager.log" 2>&1 &
  echo $! >"$P_STATE/kcm.pid"
  KUBELET_STATE=$P_STATE/kubelet CNI_BRIDGE=$P_BRIDGE POD_CIDR=$P_PODS "$PEERS/run-kubelet.sh" "$KCFG" "$PEERS_BIN" >&2
  local f; for f in "$IMAGES"/*.tar; do
    ctr -a "$P_STATE/kubelet/containerd.sock" -n k8s.io images import --all-platforms "$f" >/dev/null
  done
  log "peer ready: $KCFG" >&2
}

stop_peer() {
  KUBELET_STATE=$P_STATE/kubelet CNI_BRIDGE=$P_BRIDGE "$PEERS/run-kubelet.sh" stop || true
  if [ -f "$P_STATE/kcm.pid" ]; then kill "$(cat "$P_STATE/kcm.pid")" 2>/dev/null || true; rm -f "$P_STATE/kcm.pid"; fi
  KAPI_STATE=$P_STATE/kapi "$PEERS/run-kube-apiserver.sh" stop || true
  ip link del "$P_BRIDGE" 2>/dev/null || true
}

CMD=${1:?usage: $0 kube|peer [FOCUS] | start kube|peer | stop kube|peer}
case "$CMD" in
stop) case "${2:-}" in kube) stop_kube;; peer) stop_peer;; *) echo "usage: $0 stop kube|peer" >&2; exit 2;; esac; exit 0;;
start) SIDE=${2:?side}; KEEP=1;;
kube|peer) SIDE=$CMD;;
*) echo "usage: $0 kube|peer [FOCUS] | start kube|peer | stop kube|peer" >&2; exit 2;;
esac
[ "$SIDE" = kube ] || [ "$SIDE" = peer ] || { echo "side must be kube or peer" >&2; exit 2; }
mkdir -p "$WORK"
images
[ "$SIDE" = kube ] && BIN=$(kube_bin)
if [ -n "$LOCK" ] && [ -z "${CONFORMANCE_LOCKED:-}" ]; then
  log "waiting for $LOCK"
  exec 9>"$LOCK"; flock 9
  export CONFORMANCE_LOCKED=1
fi
stop_side() { if [ "$SIDE" = kube ]; then stop_kube; else stop_peer; fi; }
[ "${KEEP:-0}" = 1 ] || trap stop_side EXIT
stop_side >/dev/null 2>&1 || true # leftovers of an interrupted run
if [ "$SIDE" = kube ]; then start_kube "$BIN"; REV=${KUBE_REV:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}; else start_peer; REV=v1.37.2; fi
if [ "$CMD" = start ]; then echo "$KCFG"; exit 0; fi
OUT=$WORK/results/$SIDE-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
{ echo "side $SIDE ($REV), start $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"; } | tee "$OUT/run.txt"
E2E_BIN=$E2E_BIN KUBECTL=$KUBECTL OUT=$OUT PAR=${PAR:-2} TEST_TIMEOUT=${TEST_TIMEOUT:-180} TOTAL_TIMEOUT=${TOTAL_TIMEOUT:-3600} \
  "$PEERS/run-conformance.sh" "$KCFG" ${2:+"$2"} | tee "$OUT/suite.txt"
{ echo "end $(date -u +%FT%TZ), load:$(uptime | sed 's/.*load average://')"; tail -1 "$OUT/suite.txt"; } | tee -a "$OUT/run.txt"
exit
}
