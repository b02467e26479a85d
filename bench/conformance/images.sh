#!/usr/bin/env bash
# images.sh OUT_DIR [WORK_DIR] — OCI image archives, under the e2e suite's own image names, of the
# upstream test images the sig-api-machinery conformance tests run (there is no registry here),
# built from source through the Go module proxy:
#   registry.k8s.io/pause:3.10.2                            a static pause (waits for SIGTERM, reaps children)
#   registry.k8s.io/e2e-test-images/agnhost:2.66.1          k8s.io/kubernetes/test/images/agnhost v1.37.2, plus
#                                                           /bin/busybox (the suite's pods run sh, cat, …)
#   registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2 k8s.io/sample-apiserver v0.37.2 (/sample-apiserver)
#   registry.k8s.io/etcd:3.7.0-0                            /usr/local/bin/etcd = go.etcd.io/etcd/server/v3's etcdmain
# The names are those of k8s.io/kubernetes/test/utils/image v1.37.2 (the suite asks for exactly these).
# Each archive is an OCI image layout with one uncompressed layer, importable by `ctr images import`
# and by `kube server --agent-image-dir`.
#
# The binaries come from one scratch module (WORK_DIR, default a new mktemp dir) that requires
# k8s.io/kubernetes and k8s.io/sample-apiserver and replaces every staging module k8s.io/kubernetes
# requires at v0.0.0 with v0.37.2 — the approach of ../../../shared/peers/build-k8s.sh. Static
# (CGO_ENABLED=0), -trimpath. Needs /bin/busybox (busybox-static). Cold build: ~10 minutes on 2 cores.
# BINDIR=DIR skips the build and takes pause, agnhost, sample-apiserver, etcd from DIR.
set -euo pipefail
{
OUT=${1:?usage: $0 OUT_DIR [WORK_DIR]}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
STAGING_VERSION=v0.${KUBE_VERSION#v1.}
[ -x /bin/busybox ] || { echo "images.sh: /bin/busybox missing (apt-get install busybox-static)" >&2; exit 1; }

if [ -z "${BINDIR:-}" ]; then
  WORK=${2:-$(mktemp -d /tmp/conformance-images.XXXXXX)}
  mkdir -p "$WORK"; WORK=$(cd "$WORK" && pwd)
  BINDIR=$WORK/bin
  export GOFLAGS="${GOFLAGS:-} -mod=mod" GOTOOLCHAIN=${GOTOOLCHAIN:-local} CGO_ENABLED=0
  cd "$WORK"; rm -rf go.mod go.sum cmd
  KMOD=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$KMOD" ] || { echo "cannot download k8s.io/kubernetes@$KUBE_VERSION" >&2; exit 1; }
  STAGING=$(awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r&&$1~/^k8s\.io\//&&$2=="v0.0.0"{print $1}' "$KMOD" | sort -u)
  GOVER=$(awk '$1=="go"{print $2; exit}' "$KMOD")
  {
    echo "module k8s.local/conformance-images"; echo; echo "go $GOVER"; echo
    echo "require ("
    echo "	k8s.io/kubernetes $KUBE_VERSION"
    echo "	k8s.io/sample-apiserver $STAGING_VERSION"
    echo ")"; echo
    echo "replace ("
    for m in $STAGING; do echo "	$m => $m $STAGING_VERSION"; done
    echo ")"
  } >go.mod
  mkdir -p cmd/pause cmd/etcd cmd/tools
  cat >cmd/pause/main.go <<'GO'
// Command pause is the pod sandbox process: it blocks until SIGINT or SIGTERM and reaps the
// zombie children it inherits meanwhile.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-chld:
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
GO
  cat >cmd/etcd/main.go <<'GO'
// Command etcd is etcd's own main (etcdmain), so the flags the e2e suite gives its etcd container work.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  # keeps the two upstream mains in the module graph for `go mod tidy`
  cat >cmd/tools/tools.go <<'GO'
//go:build tools

// Package tools names the upstream mains this module builds.
package tools

import (
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/sample-apiserver"
)
GO
  go mod tidy
  mkdir -p "$BINDIR"
  go build -p "${BUILD_P:-$(nproc)}" -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w" -o "$BINDIR/" \
    ./cmd/pause ./cmd/etcd k8s.io/kubernetes/test/images/agnhost k8s.io/sample-apiserver
fi
for b in pause agnhost sample-apiserver etcd; do [ -x "$BINDIR/$b" ] || { echo "images.sh: missing $BINDIR/$b" >&2; exit 1; }; done

oci_image() { # OUT.tar NAME CONFIG_JSON ROOTFS
  local out=$1 name=$2 cfg=$3 rootfs=$4 d ld ls cd cs md ms
  d=$(mktemp -d); mkdir -p "$d/blobs/sha256"
  tar -C "$rootfs" --owner=0 --group=0 --numeric-owner --sort=name --mtime=@0 -cf "$d/layer.tar" .
  ld=$(sha256sum "$d/layer.tar" | cut -d' ' -f1); ls=$(stat -c %s "$d/layer.tar"); mv "$d/layer.tar" "$d/blobs/sha256/$ld"
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cfg" "$ld" >"$d/config.json"
  cd=$(sha256sum "$d/config.json" | cut -d' ' -f1); cs=$(stat -c %s "$d/config.json"); mv "$d/config.json" "$d/blobs/sha256/$cd"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd" "$cs" "$ld" "$ls" >"$d/manifest.json"
  md=$(sha256sum "$d/manifest.json" | cut -d' ' -f1); ms=$(stat -c %s "$d/manifest.json"); mv "$d/manifest.json" "$d/blobs/sha256/$md"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"},"platform":{"architecture":"amd64","os":"linux"}}]}' "$md" "$ms" "$name" "${name##*:}" >"$d/index.json"
  tar -C "$d" -cf "$out.tmp" oci-layout index.json blobs && mv "$out.tmp" "$out"
  rm -rf "$d"
}
R=$(mktemp -d); trap 'rm -rf "$R"' EXIT
mkdir -p "$R/pause" "$R/agnhost/bin" "$R/agnhost/tmp" "$R/agnhost/uploads" "$R/sample" "$R/etcd/usr/local/bin" "$R/etcd/tmp"
cp "$BINDIR/pause" "$R/pause/pause"
cp "$BINDIR/agnhost" "$R/agnhost/agnhost"; ln -s agnhost "$R/agnhost/agnhost-2"
cp /bin/busybox "$R/agnhost/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$R/agnhost/bin/$a" ] || ln -s busybox "$R/agnhost/bin/$a"; done
cp "$BINDIR/sample-apiserver" "$R/sample/sample-apiserver"
cp "$BINDIR/etcd" "$R/etcd/usr/local/bin/etcd"
oci_image "$OUT/pause.tar" registry.k8s.io/pause:3.10.2 '{"Entrypoint":["/pause"],"User":"65535:65535"}' "$R/pause"
oci_image "$OUT/agnhost.tar" registry.k8s.io/e2e-test-images/agnhost:2.66.1 '{"Entrypoint":["/agnhost"],"Cmd":["pause"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}' "$R/agnhost"
oci_image "$OUT/sample-apiserver.tar" registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2 '{"Entrypoint":["/sample-apiserver"]}' "$R/sample"
oci_image "$OUT/etcd.tar" registry.k8s.io/etcd:3.7.0-0 '{"Env":["PATH=/usr/local/bin:/usr/bin:/bin"],"WorkingDir":"/tmp"}' "$R/etcd"
ls -la "$OUT"
exit
}
