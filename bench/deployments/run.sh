#!/usr/bin/env bash
# run.sh — issue 15's first performance goal (bench/README.md, "Workload controllers:
# Deployments → Available → rolling update → Available"): DEPLOYMENTS Deployments ×
# REPLICAS replicas on NODES simulated nodes → all Available, then a rolling update of
# every one → all Available again (bench/deployments, main.go). Two runs of the same
# `kube server` build, each on a fresh etcd of its own (`kube etcd`, a separate process, so
# the server's CPU excludes etcd's) and a fresh data directory, the nodes simulated by a
# separate `kube sim` process (the same node model for both sides):
#   kube  Kube's in-process controllers and scheduler (the server's defaults)
#   peer  the server with --scheduler=false --disable-workload-controllers and every
#         cluster controller off; kube-controller-manager v1.37.2 running exactly the
#         controllers Kube turned off, and kube-scheduler v1.37.2, both as their own
#         identities (system:kube-controller-manager with --use-service-account-credentials,
#         system:kube-scheduler), no leader election, client limits QPS = burst = $PEER_QPS
#         (5000: Kube's in-process clients are unthrottled; their defaults, 20/30 and 50/100,
#         would measure the rate limiters)
# Usage: bench/deployments/run.sh [PEERS_BIN]   (kube-controller-manager; kube-scheduler from
#        $SCHEDULER, default PEERS_BIN/kube-scheduler, else /tmp/h14/bin/kube-scheduler)
# Env: DEPLOYMENTS (1000) REPLICAS (10) NODES (1000) ONLY (kube|peer) OUT (mktemp)
#      PEER_QPS (5000) PROFILE (1: record the server's CPU profile; default 1) NODE_GRACE (10m)
# Run the measured runs under the machine-wide lock: flock /tmp/kube-bench.lock bench/deployments/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-/work/peers-bin}
SCHEDULER=${SCHEDULER:-$BIN/kube-scheduler}
[[ -x $SCHEDULER ]] || SCHEDULER=/tmp/h14/bin/kube-scheduler
DEPLOYMENTS=${DEPLOYMENTS:-1000}; REPLICAS=${REPLICAS:-10}; NODES=${NODES:-1000}; ONLY=${ONLY:-}
PEER_QPS=${PEER_QPS:-5000}; PROFILE=${PROFILE:-1}
# Both node lifecycle controllers (Kube's, kube-controller-manager's) get this
# --node-monitor-grace-period: on a loaded machine `kube sim` renews 1,000 Leases late
# (behind its pod status writes), the controller marks the nodes NotReady and their pods
# Ready=False, and the simulator does not turn those pods Ready again when the node comes
# back (a kubelet's status manager would): the rollout never finishes. No node fails here.
NODE_GRACE=${NODE_GRACE:-10m}
OUT=${OUT:-$(mktemp -d /tmp/kube-deploybench.XXXXXX)}
mkdir -p "$OUT/bin"
PORT=27443; EPORT=27479
CLUSTER_CIDR=10.192.0.0/10 # room for NODES /24s on both sides (the default /16 holds 256)
# kube-controller-manager's names for the controllers --disable-workload-controllers and
# --cluster-controllers turn off in the peer's server
KCM_CONTROLLERS=deployment-controller,replicaset-controller,replicationcontroller-controller,statefulset-controller,daemonset-controller,job-controller,cronjob-controller,ttl-after-finished-controller,disruption-controller,endpointslice-controller,endpointslice-mirroring-controller,endpoints-controller,node-ipam-controller,node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller,resourcequota-controller,persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,ephemeral-volume-controller,horizontal-pod-autoscaler-controller,bootstrap-signer-controller,token-cleaner-controller,ttl-controller,storage-version-migrator-controller
[[ -x $OUT/bin/kube ]] || nice -n 19 go build -o "$OUT/bin/kube" ./cmd/kube
[[ -x $OUT/bin/deploybench ]] || nice -n 19 go build -o "$OUT/bin/deploybench" ./bench/deployments
pids=()
stop_all() { local i p; for ((i=${#pids[@]}-1; i>=0; i--)); do p=${pids[i]}; kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop_all EXIT

start_side() { # $1 side, then the server's extra flags
  local side=$1 d=$OUT/$1; shift
  rm -rf "$d"; mkdir -p "$d"
  "$OUT/bin/kube" etcd --name e1 --data-dir "$d/etcd" --listen-client-urls "http://127.0.0.1:$EPORT" \
    --listen-peer-urls "http://127.0.0.1:$((EPORT+1))" --initial-cluster "e1=http://127.0.0.1:$((EPORT+1))" >"$d/etcd.log" 2>&1 &
  ETCD=$!; pids+=("$ETCD")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$EPORT/health" >/dev/null 2>&1 && break; sleep 0.2; done
  "$OUT/bin/kube" server --data-dir "$d/data" --secure-port "$PORT" --etcd-servers "http://127.0.0.1:$EPORT" --log-level error \
    --embedded-nats=false --embedded-s3=false --cluster-cidr "$CLUSTER_CIDR" \
    --node-monitor-grace-period "$NODE_GRACE" --node-startup-grace-period "$NODE_GRACE" "$@" >"$d/server.log" 2>&1 &
  SRV=$!; pids+=("$SRV")
  K=$d/data/kubeconfig
  for _ in $(seq 300); do [[ -f $K ]] && kubectl --kubeconfig "$K" get --raw /readyz >/dev/null 2>&1 && break; sleep 1; done
  kubectl --kubeconfig "$K" get --raw /readyz >/dev/null || { echo "$side: server not ready; $d/server.log" >&2; exit 1; }
}
start_sim() { # $1 side
  local d=$OUT/$1
  "$OUT/bin/kube" sim --kubeconfig "$K" --nodes "$NODES" --log-level error >"$d/sim.log" 2>&1 &
  SIM=$!; pids+=("$SIM")
  while [[ $(kubectl --kubeconfig "$K" get nodes --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l) -lt $NODES ]]; do sleep 2; done
  # node IPAM done (every node has its pod CIDR) before anything is measured
  while kubectl --kubeconfig "$K" get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{"\n"}{end}' | grep -qx ''; do sleep 2; done
  sleep 10 # settle after the nodes' registration
}
run_bench() { # $1 side, $2 pids
  local d=$OUT/$1 prof=()
  [[ $PROFILE == 1 ]] && prof=(-profile-dir "$d/profile")
  echo "== $1 $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$OUT/bin/deploybench" -kubeconfig "$K" -deployments "$DEPLOYMENTS" -replicas "$REPLICAS" -pids "$2" -label "$1" "${prof[@]}" \
    2> >(sed -u "s/^/[$1] /" >&2) | tee -a "$OUT/results.jsonl"
}

if [[ $ONLY != peer ]]; then
  start_side kube
  start_sim kube
  run_bench kube "server=$SRV,etcd=$ETCD,sim=$SIM"
  stop_all
fi
if [[ $ONLY != kube ]]; then
  start_side peer --scheduler=false --disable-workload-controllers --cluster-controllers=-endpointslice-controller
  d=$OUT/peer; P=$d/data/pki
  (cd "$d" && "$OUT/bin/kube" certs user system:kube-controller-manager --data-dir data -o kcm.kubeconfig >/dev/null)
  (cd "$d" && "$OUT/bin/kube" certs user system:kube-scheduler --data-dir data -o sched.kubeconfig >/dev/null)
  "$BIN/kube-controller-manager" --kubeconfig="$d/kcm.kubeconfig" --authentication-kubeconfig="$d/kcm.kubeconfig" \
    --authorization-kubeconfig="$d/kcm.kubeconfig" --bind-address=127.0.0.1 --secure-port=10357 --leader-elect=false \
    --use-service-account-credentials=true --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --kube-api-qps="$PEER_QPS" --kube-api-burst="$PEER_QPS" --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" \
    --node-monitor-grace-period="$NODE_GRACE" --node-startup-grace-period="$NODE_GRACE" \
    --controllers="$KCM_CONTROLLERS" >"$d/kcm.log" 2>&1 &
  KCM=$!; pids+=("$KCM")
  cat >"$d/sched.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $d/sched.kubeconfig
  qps: $PEER_QPS
  burst: $PEER_QPS
leaderElection:
  leaderElect: false
EOF
  "$SCHEDULER" --config "$d/sched.yaml" --secure-port=0 --authentication-kubeconfig="$d/sched.kubeconfig" \
    --authorization-kubeconfig="$d/sched.kubeconfig" >"$d/sched.log" 2>&1 &
  SCHED=$!; pids+=("$SCHED")
  start_sim peer
  run_bench peer "server=$SRV,etcd=$ETCD,sim=$SIM,kcm=$KCM,scheduler=$SCHED"
  stop_all
fi
echo "results: $OUT/results.jsonl" >&2
