// Package cni is the node agent's pod network: the CNI configuration it writes for
// containerd's CRI plugin (the containernetworking-plugins bridge with host-local IPAM over
// the node's pod CIDR, portmap for hostPorts, loopback), and the host routes around it.
//
// The bridge holds the pod CIDR's gateway address (isGateway), so the host reaches its pods
// over a connected route; an `unreachable` route for the whole cluster CIDR (metric 4000)
// makes sure that a pod address without a local route never follows the default route off
// the machine.
package cni
