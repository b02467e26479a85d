package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/server/servertest/slot"
)

// TestRunCommandAndSIGTERM runs the README's run command as a user does (the real binary,
// a fresh data directory), checks what it prints, then sends SIGTERM while a watch is open:
// the watch ends, the process exits 0, and a restart on the same directory finds the data;
// then a SIGKILL, after which the restarted server leads its controllers again at once.
func TestRunCommandAndSIGTERM(t *testing.T) {
	dir := t.TempDir()
	bin := servertest.BuildKube(t, dir)
	port := freePort(t)
	dataDir := filepath.Join(dir, "data")
	// start runs the server with the test's environment minus GOGC, plus env.
	start := func(env ...string) (*exec.Cmd, string) {
		cmd := exec.Command(bin, "server", "--data-dir", dataDir, "--secure-port", strconv.Itoa(port))
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOGC=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var kubeconfig string
		deadline := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("kube server exited before it was ready")
				}
				if k, found := strings.CutPrefix(l, "export KUBECONFIG="); found {
					kubeconfig = k
				}
				if strings.HasPrefix(l, "Kube is ready at https://127.0.0.1:"+strconv.Itoa(port)) {
					if kubeconfig != filepath.Join(dataDir, "kubeconfig") {
						t.Fatalf("printed KUBECONFIG %q, want %q", kubeconfig, filepath.Join(dataDir, "kubeconfig"))
					}
					return cmd, kubeconfig
				}
			case <-deadline:
				t.Fatal("kube server not ready within 60 s")
			}
		}
	}
	cmd, kubeconfig := start()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	expectGCPercent(t, cs, "75") // the server's default when GOGC is not set
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	watchEnded := make(chan struct{})
	go func() {
		for range w.ResultChan() {
		}
		close(watchEnded)
	}()
	select {
	case <-watchEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("the open watch did not end after SIGTERM")
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("kube server exited with %v after SIGTERM, want exit status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kube server did not exit within 30 s of SIGTERM")
	}

	cmd, kubeconfig = start("GOGC=100")
	cfg, _ = clientcmd.BuildConfigFromFlags("", kubeconfig)
	cs = kubernetes.NewForConfigOrDie(cfg)
	expectGCPercent(t, cs, "100") // GOGC in the environment wins
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "survives", metav1.GetOptions{}); err != nil {
		t.Fatalf("after a restart on the same data directory: %v", err)
	}

	// A crash (SIGKILL) leaves the controllers' Leases held. The server restarted on its
	// address is the holder they name, so it resumes leading at once rather than waiting
	// for them to expire: the Lease keeps its holder and counts no transition, and a CRD
	// created right away is established.
	held := lease(t, cs, "kube-crd-controller")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	_, kubeconfig = start()
	cfg, _ = clientcmd.BuildConfigFromFlags("", kubeconfig)
	ext := apiextclient.NewForConfigOrDie(cfg)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crashes.e2e.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "e2e.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crashes", Kind: "Crash"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}}}},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !established(ctx, ext, crd.Name) {
		if time.Now().After(deadline) {
			t.Fatal("a CRD created after the crash restart was not established")
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := lease(t, kubernetes.NewForConfigOrDie(cfg), "kube-crd-controller")
	if after.holder != held.holder || after.transitions != held.transitions {
		t.Fatalf("kube-crd-controller Lease before the crash: holder %q, %d transitions; after the restart: %q, %d (the restarted server waited the Lease out)",
			held.holder, held.transitions, after.holder, after.transitions)
	}
}

type leaseState struct {
	holder      string
	transitions int32
}

// lease reads the leader-election Lease name.
func lease(t *testing.T, cs kubernetes.Interface, name string) leaseState {
	t.Helper()
	l, err := cs.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var s leaseState
	if l.Spec.HolderIdentity != nil {
		s.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		s.transitions = *l.Spec.LeaseTransitions
	}
	return s
}

func established(ctx context.Context, ext apiextclient.Interface, name string) bool {
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// expectGCPercent checks the GC percent the server reports on /metrics.
func expectGCPercent(t *testing.T, cs kubernetes.Interface, want string) {
	t.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_gogc_percent "); ok {
			if v != want {
				t.Fatalf("go_gc_gogc_percent %s, want %s", v, want)
			}
			return
		}
	}
	t.Fatal("/metrics has no go_gc_gogc_percent")
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := slot.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
