// Package cli is the kube command line: `kube server` runs the control plane, `kube etcd`
// runs one etcd member on its own. Flags map one to one onto the Options of the package
// they configure; validation names the bad flag.
package cli
