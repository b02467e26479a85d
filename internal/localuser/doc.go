// Package localuser lets tests act as another local user of the machine: DialAsNobody
// connects to a unix socket with the file-system identity of nobody (65534), to check that
// a socket Kube creates is closed to other users (Linux only; elsewhere it does not try), and
// AssertMode checks the modes that keep them out.
package localuser
