// Package alerting measures the Alert evaluator: the CPU one evaluation round of 1,000 rules
// takes over Kube's metrics sampled in memory (BenchmarkRound1000), the interval Kube
// evaluates at being 15 s. Run:
//
//	go test -run '^$' -bench . -benchtime 20x ./bench/alerting/
package alerting
