// Package netpoltest is upstream's NetworkPolicy e2e matrix as data: the model (pods a, b,
// c in namespaces x, y, z, each serving TCP 80 and 81 under the container port names
// serve-80-tcp and serve-81-tcp) and the cases — the policies (and label changes) of each
// step and the reachability matrix upstream expects after it. The cases port the intent of
// k8s.io/kubernetes test/e2e/network/netpol (network_policy.go); they are shared by the
// pure table test of internal/agent/netpol (Compute + Evaluate as the oracle) and by
// test/netpol, which applies them to real pods and probes the kernel's answer.
//
// Cases run in order over one set of pods: each step states the whole set of policies and
// the extra labels that should exist (what is not listed is removed), so consecutive steps
// with the same policy name exercise updates and label changes.
package netpoltest
