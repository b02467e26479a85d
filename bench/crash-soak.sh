#!/bin/sh
# Crash soak of the storage kernel: kills an embedded etcd member with SIGKILL in the middle
# of concurrent writes ROUNDS times (default 25) and checks after each restart that no
# acknowledged write is lost and that a resumed watch sees every later change exactly once.
# Usage: bench/crash-soak.sh [rounds]   (RACE=1 adds -race)
set -eu
cd "$(dirname "$0")/.."
rounds="${1:-${ROUNDS:-25}}"
race=""
[ "${RACE:-0}" = 1 ] && race="-race"
KUBE_CRASH_ROUNDS="$rounds" exec go test $race -count=1 -timeout 60m -v \
	-run '^TestCrashRecovery$' ./internal/storage/crashtest/
