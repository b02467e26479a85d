// Package crashtest proves the storage kernel's crash guarantees against a real etcd member
// that is killed with SIGKILL in the middle of concurrent writes: no acknowledged write is
// lost, revisions keep increasing across restarts, and a watch resumed from the last revision
// seen before the crash delivers every later change exactly once, in order.
//
// The test binary re-executes itself as the child that runs the member and the writers
// (KUBE_CRASHTEST_CHILD=1); the parent test kills and restarts it on the same data directory.
// The default run does 2 rounds; KUBE_CRASH_ROUNDS=N does N (bench/crash-soak.sh runs 25).
package crashtest
