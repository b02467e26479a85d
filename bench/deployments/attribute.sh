#!/usr/bin/env bash
# attribute.sh — splits a kube server CPU profile (bench/deployments -profile-dir pieces)
# into exclusive parts by the frames on each sample's stack, first match wins, in this
# order: scheduler (Kube's and upstream's scheduler packages), controllers (internal/
# controllers and upstream's pkg/controller, which Kube's controllers run), controller
# clients (client-go's informers and REST client: in the server process only the in-process
# controllers, the scheduler and the admission plugins' informers use client-go), then the
# rest (the API server, storage, the runtime's own GC and scheduling).
# Usage: bench/deployments/attribute.sh KUBE_BINARY PROFILE...
set -euo pipefail
bin=$1; shift
total() { go tool pprof -top -nodecount=1000000 "$@" "$bin" "${profiles[@]}" 2>/dev/null |
  sed -n 's/^Showing nodes accounting for \([0-9.]*\)\(m\?s\),.*/\1 \2/p' | awk '{print ($2=="ms") ? $1/1000 : $1}'; }
profiles=("$@")
all=$(go tool pprof -top -nodecount=1 "$bin" "${profiles[@]}" 2>/dev/null | sed -n 's/.*Total samples = \([0-9.]*\)s.*/\1/p')
sched='kubeos.dev/kube/internal/scheduler|k8s.io/kubernetes/pkg/scheduler'
ctrl='kubeos.dev/kube/internal/controllers|k8s.io/kubernetes/pkg/controller'
client='k8s.io/client-go/tools/cache|k8s.io/client-go/rest|k8s.io/client-go/informers|k8s.io/client-go/listers'
s=$(total -focus="$sched")
c=$(total -focus="$ctrl" -ignore="$sched")
k=$(total -focus="$client" -ignore="$sched|$ctrl")
awk -v a="$all" -v s="$s" -v c="$c" -v k="$k" 'BEGIN {
  printf "total %.1f s\nscheduler %.1f s (%.1f %%)\ncontrollers %.1f s (%.1f %%)\nclient-go (informers, REST) %.1f s (%.1f %%)\nrest %.1f s (%.1f %%)\n",
    a, s, 100*s/a, c, 100*c/a, k, 100*k/a, a-s-c-k, 100*(a-s-c-k)/a }'
