// Package images makes and imports container images without a registry.
//
// WriteOCI writes an OCI image-layout tarball (one uncompressed layer) from a list of
// files; Pause is the pod sandbox image Kube makes itself, a 129-byte static x86-64 ELF
// that loops on pause(2) (the sandbox is stopped with SIGKILL, and in the default pod
// without a shared pid namespace it has no children to reap); Import loads OCI or docker
// archives into a containerd's k8s.io namespace through containerd's own importer (the
// `ctr images import` that ships with containerd: CRI v1 has no import call).
package images
