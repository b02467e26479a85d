#!/usr/bin/env bash
# bench/simnode/run.sh — simulated nodes at scale: `kube sim` (its own process) and kwok
# v0.8.0 side by side, each against a fresh `kube server` of the same build and flags.
#
# For each simulator: register NODES nodes and wait until they are Ready; stop the
# simulator; create PODS pods bound to them round robin (spec.nodeName); start the
# simulator again and time until all pods are Running (transitions/s: the simulator lists,
# then patches every pod); then hold HOLD with every node heartbeating and every pod
# Running, sampling the simulator's CPU and RSS from /proc.
#
# Usage: bench/simnode/run.sh [kube|kwok|both]   Env: NODES (5000) PODS (100000) HOLD (10m)
#        OUT (/tmp/simbench) PREBUILT (a directory with kube and simload, else built here) KWOK (/tmp/kwok-state/kwok, built by
#        `GOBIN=/tmp/kwok-state go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0` outside go.mod)
set -euo pipefail
cd "$(dirname "$0")/../.."
WHICH=${1:-both}
NODES=${NODES:-5000}; PODS=${PODS:-100000}; HOLD=${HOLD:-10m}
OUT=${OUT:-/tmp/simbench}; KWOK=${KWOK:-/tmp/kwok-state/kwok}
PORT=${PORT:-17443}
# The same server for both: no scheduler (pods are bound by spec.nodeName), no workload
# controllers (the pods have no owners), and none of the controllers that would act on
# nodes whose heartbeats pause while the simulator is stopped for the creates (taint
# eviction, pod GC) or rewrite every Node as the cluster grows (ttl).
SERVER_FLAGS=${SERVER_FLAGS:---scheduler=false --disable-workload-controllers --cluster-controllers=*,-taint-eviction-controller,-pod-garbage-collector,-ttl-controller}
# Both simulators get 64 requests in flight and no client-side rate limit to speak of.
SIM_FLAGS=${SIM_FLAGS:---workers 64 --qps 20000}
mkdir -p "$OUT"
mkdir -p "$OUT/bin"
if [[ -n ${PREBUILT:-} ]]; then # a directory holding kube and simload built already
  cp "$PREBUILT/kube" "$PREBUILT/simload" "$OUT/bin/"
else
  go build -o "$OUT/bin/kube" ./cmd/kube
  go build -o "$OUT/bin/simload" ./bench/simnode/simload
fi
SRV=""; SIM=""
cleanup() { [[ -n $SIM ]] && kill "$SIM" 2>/dev/null || true; [[ -n $SRV ]] && kill "$SRV" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

server() { # $1: name
  rm -rf "$OUT/$1"; mkdir -p "$OUT/$1"
  "$OUT/bin/kube" server --data-dir "$OUT/$1/data" --secure-port $PORT --log-level error $SERVER_FLAGS >"$OUT/$1/server.log" 2>&1 &
  SRV=$!
  K=$OUT/$1/data/kubeconfig
  for _ in $(seq 1 120); do [[ -f $K ]] && kubectl --kubeconfig "$K" get --raw /readyz >/dev/null 2>&1 && return; sleep 1; done
  echo "server did not start; $OUT/$1/server.log" >&2; exit 1
}
stop_server() { kill "$SRV"; wait "$SRV" 2>/dev/null || true; SRV=""; }

ready_nodes() { # $1 selector: wait until NODES nodes are Ready
  local t0=$SECONDS
  while :; do
    r=$(kubectl --kubeconfig "$K" get nodes -l "$1" --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l)
    [[ $r -ge $NODES ]] && { echo "  $NODES nodes Ready after $((SECONDS-t0)) s"; return; }
    [[ $((SECONDS-t0)) -gt 900 ]] && { echo "  only $r nodes Ready" >&2; exit 1; }
    sleep 10
  done
}

start_kube_sim() {
  "$OUT/bin/kube" sim --kubeconfig "$K" --nodes "$NODES" $SIM_FLAGS --stats-interval 30s --log-level warn >>"$OUT/kube/sim.log" 2>&1 &
  SIM=$!
}
start_kwok() {
  M=$(go env GOMODCACHE)/sigs.k8s.io/kwok@v0.8.0/kustomize/stage
  { cat <<Y
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 64
  nodePlayStageParallelism: 64
  nodeLeaseParallelism: 64
  podsOnNodeSyncParallelism: 64
Y
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do echo '---'; cat "$M/$f"; done
  } >"$OUT/kwok/kwok.yaml"
  "$KWOK" --kubeconfig "$K" --manage-nodes-with-label-selector type=kwok --node-lease-duration-seconds 40 --cidr 10.128.0.0/9 \
    --config "$OUT/kwok/kwok.yaml" >>"$OUT/kwok/kwok.log" 2>&1 &
  SIM=$!
}
# requests: the server's answered requests by verb and resource (kube_apiserver_requests_total, watches excepted,
# summed over codes), one "verb/resource count" per line; proc_cpu: a process's CPU seconds.
requests() {
  kubectl --kubeconfig "$K" get --raw /metrics 2>/dev/null | awk '/^kube_apiserver_requests_total\{/ {
    v=$0; sub(/.*verb="/,"",v); sub(/".*/,"",v); r=$0; sub(/.*resource="/,"",r); sub(/".*/,"",r)
    if (tolower(v)!="watch") n[tolower(v) "/" r]+=$NF } END {for (k in n) print k, n[k]}' | sort
}
proc_cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14+$15)/t}' "/proc/$1/stat"; }
stop_sim() { kill "$SIM"; wait "$SIM" 2>/dev/null || true; SIM=""; }

run() { # $1: kube|kwok
  echo "== $1: $NODES nodes, $PODS pods ($(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg))"
  server "$1"
  if [[ $1 == kube ]]; then
    start_kube_sim; ready_nodes type=kube-sim
  else
    start_kwok
    # kwok manages Nodes someone else creates (as run-kwok.sh): the same labels and capacity.
    "$OUT/bin/simload" nodes -kubeconfig "$K" -nodes "$NODES" -prefix sim- -concurrency 32 | sed 's/^/  /'
    ready_nodes type=kwok
  fi
  stop_sim
  "$OUT/bin/simload" create -kubeconfig "$K" -n "$PODS" -nodes "$NODES" -prefix sim- -ns simbench | sed 's/^/  /'
  "$OUT/bin/simload" wait -kubeconfig "$K" -n "$PODS" -ns simbench >"$OUT/$1/wait.log" 2>&1 &
  W=$!
  sleep 2
  requests >"$OUT/$1/requests-before.txt"; CPU0=$(proc_cpu "$SRV")
  if [[ $1 == kube ]]; then start_kube_sim; else start_kwok; fi
  "$OUT/bin/simload" sample -pid "$SIM" -duration 24h -interval 10s >"$OUT/$1/sample-transitions.log" 2>&1 &
  S=$!
  wait $W || true; kill $S 2>/dev/null || true
  tail -1 "$OUT/$1/wait.log" | sed 's/^/  /'
  requests >"$OUT/$1/requests-after.txt"
  echo "  server CPU over the transitions: $(echo "$(proc_cpu "$SRV") $CPU0" | awk '{printf "%.1f s", $1-$2}'); requests the server answered meanwhile, watches excepted (verb resource: count):"
  awk 'NR==FNR{b[$1]=$2; next} {d=$2-b[$1]; if (d>0) print "    " $1 ": " d}' "$OUT/$1/requests-before.txt" "$OUT/$1/requests-after.txt"
  echo "  during the transitions: $(tail -1 "$OUT/$1/sample-transitions.log")"
  echo "  hold $HOLD (load average $(cut -d' ' -f1-3 /proc/loadavg)):"
  "$OUT/bin/simload" sample -pid "$SIM" -duration "$HOLD" -interval 10s >"$OUT/$1/sample-hold.log" 2>&1
  echo "  $(tail -1 "$OUT/$1/sample-hold.log")"
  echo "  load average at the end of the hold: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "  after the hold: $("$OUT/bin/simload" check -kubeconfig "$K" -ns simbench)"
  stop_sim; stop_server
}
# (if, not &&: a skipped side must not become the script's exit status)
if [[ $WHICH == kube || $WHICH == both ]]; then run kube; fi
if [[ $WHICH == kwok || $WHICH == both ]]; then run kwok; fi
