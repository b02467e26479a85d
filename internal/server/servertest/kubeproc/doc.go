// Package kubeproc is for tests that run kube and kubectl as processes, as a user does: the
// kube binary of this module (BuildKube, linked once for all test packages through the go
// command's cache), kubectl.<version> (FindKubectl, RunKubectl), a log Buffer safe for
// concurrent writes, Eventually for conditions with a deadline, and TempDir.
//
// It does not import the server: a test package that only starts kube processes links a test
// binary of a few MB instead of one that embeds the whole control plane (~35 s of CPU per
// link). Tests that run a server in-process use the parent package, servertest, which
// re-exports these helpers.
package kubeproc
