#!/bin/bash
# Usage: go build -o kube ./cmd/kube && KUBE=./kube bash bench/embedded-cost.sh
# Binary size: compare with a build whose internal/dataservices/s3/child.go (the only importer
# of versitygw) is replaced by a stub of its constants.
# RSS of kube server with the embedded data servers on and off (after ready + 20 s idle).
set -u
run() {
  local name=$1; shift
  local dir=$(mktemp -d /tmp/h4mem-XXXX)
  local port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  ${KUBE:-./kube} server --data-dir "$dir" --secure-port "$port" "$@" > "$dir/log" 2>&1 &
  local pid=$!
  for i in $(seq 1 120); do grep -q "Kube is ready" "$dir/log" && break; sleep 1; done
  sleep 20
  local rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  local child=$(pgrep -P $pid | head -1)
  local crss=0
  if [ -n "$child" ]; then crss=$(awk '/VmRSS/{print $2}' /proc/$child/status); fi
  echo "$name: kube server RSS ${rss} kB, child (S3 gateway) RSS ${crss} kB"
  kill $pid; wait $pid 2>/dev/null
  rm -rf "$dir"
}
run "both off" --embedded-nats=false --embedded-s3=false
run "nats on"  --embedded-nats=true --embedded-s3=false
run "both on"  --embedded-nats=true --embedded-s3=true
