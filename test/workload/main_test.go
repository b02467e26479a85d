// Package workload tests the workload API (Pods, Nodes, Services, the apps, batch, policy,
// ... kinds) as users meet it: real kubectl 1.27 and 1.33 and client-go against one
// in-process server on embedded etcd — creating, printing, explaining, binding, evicting,
// scaling and deleting, and the errors bad input gets.
package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/server/servertest"
)

var srv *servertest.Server

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// clientset is a typed client: protobuf request and response bodies, as client-go's
// generated clients send them.
func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// kubectl runs one kubectl binary with its own HOME and discovery cache.
type kubectl struct {
	t    *testing.T
	bin  string
	home string
}

func newKubectl(t *testing.T, version string) *kubectl {
	t.Helper()
	bin, err := servertest.FindKubectl(version)
	if err != nil {
		t.Fatal(err)
	}
	return &kubectl{t: t, bin: bin, home: t.TempDir()}
}

func (k *kubectl) run(stdin string, args ...string) (string, error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + k.home, "KUBECONFIG=" + srv.Kubeconfig, "KUBECACHEDIR=" + filepath.Join(k.home, "cache")}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	k.t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out)
	return string(out), err
}

func (k *kubectl) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fails expects kubectl to fail with every want in its output.
func (k *kubectl) fails(stdin string, wants []string, args ...string) {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err == nil {
		k.t.Fatalf("kubectl %s succeeded, want a failure", strings.Join(args, " "))
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			k.t.Errorf("kubectl %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
}

// contains fails the test unless out holds every want.
func contains(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

type intstrValue = intstr.IntOrString

func intstrFromInt(n int) intstr.IntOrString { return intstr.FromInt32(int32(n)) }
