package lifecycle

// The release suite tests the Release and Application kinds against its own in-process server
// with simulated nodes (their pods go Ready without containers): a Canary 20 % → pause →
// `kubectl kube promote` (the built binary as kubectl 1.33's plugin, as a tenant's admin)
// → the Component runs the new image and the canary is gone; a broken revision (its canary
// pods crash-loop, a stage of the simulated kubelet) rolled back by itself at the progress
// deadline with the pod's reason; a Rolling release; an Application of three Components
// (by name and by selector) Ready with its status table, one held on a missing data
// service with the reason in its row; the deletion of an Application (Releases, Routes,
// then Components in reverse dependency order; the Database kept and said so); the
// validators' 422s.
//
// What simulated nodes cannot show: a real image pull failing (ImagePullBackOff comes from
// the node agent's kubelet; the canary here fails by CrashLoopBackOff, which takes the
// same path: pods not ready past the deadline, their waiting reason in the history).

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

var (
	releaseSrv *servertest.Server
	releaseLog servertest.Buffer
	admin      client.Client
	kubectlBin string
	binDir     string
	dataDir    string
	// aliceKubeconfig is an admin of tenant shop (namespace shop-dev).
	aliceKubeconfig string
)

const ns = "shop-dev"

// brokenComponent's canary pods crash-loop (the simulated kubelet's stage below).
const brokenComponent = "broken"

// rollingBadComponent's pods crash-loop once they run rollingBadImage.
const (
	rollingBadComponent = "rollbad"
	rollingBadImage     = "example.com/rollbad:2"
)

func stages() []simnode.Stage {
	crash := simnode.Stage{Name: "broken-canary", Selector: simnode.Selector{
		MatchLabels: map[string]string{v1alpha1.LabelComponent: brokenComponent, v1alpha1.LabelTrack: v1alpha1.TrackCanary},
		MatchExpressions: []simnode.Expression{
			{Key: ".metadata.deletionTimestamp", Operator: "DoesNotExist"},
			{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
		Next: simnode.Next{Containers: simnode.CrashLoopBackOff, ExitCode: 2}}
	// rollingBadComponent's pods of its second image crash-loop, whatever their track.
	crashRolled := simnode.Stage{Name: "rolling-bad", Selector: simnode.Selector{
		MatchLabels: map[string]string{v1alpha1.LabelComponent: rollingBadComponent},
		MatchExpressions: []simnode.Expression{
			{Key: ".spec.containers.image", Operator: "In", Values: []string{rollingBadImage}},
			{Key: ".metadata.deletionTimestamp", Operator: "DoesNotExist"},
			{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
		Next: simnode.Next{Containers: simnode.CrashLoopBackOff, ExitCode: 2}}
	return append([]simnode.Stage{crash, crashRolled}, simnode.DefaultStages(3*time.Second)...)
}

var releaseSuite = servertest.NewFixture("release", func(fx *servertest.Fixture) error {
	var err error
	if dataDir, err = servertest.TempDir(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	fx.Cleanup(func() { os.RemoveAll(dataDir) })
	if kubectlBin, err = servertest.FindKubectl("1.33"); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	// kubectl finds the plugin on PATH: kubectl-kube is the kube binary under that name.
	binDir = filepath.Join(dataDir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	plugin := filepath.Join(binDir, "kubectl-kube")
	if kubeBin, kerr := servertest.KubeBinary(); kerr == nil {
		err = os.Symlink(kubeBin, plugin)
	} else {
		// The go command's cache misses while the tree changes under it: build our own.
		fmt.Fprintln(os.Stderr, "release: building kube:", kerr)
		if out, berr := exec.Command("go", "build", "-o", plugin, "kubeos.dev/kube/cmd/kube").CombinedOutput(); berr != nil {
			return fmt.Errorf("release: go build kube: %v\n%s", berr, out)
		}
	}
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	os.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var logs io.Writer = &releaseLog
	if os.Getenv("RELEASE_TEST_LOG") != "" {
		logs = io.MultiWriter(&releaseLog, os.Stderr)
	}
	releaseSrv, err = servertest.StartWith(filepath.Join(dataDir, "kube"), logs, func(o *server.Options) {
		o.SimNodes = simnode.Options{Nodes: 3, Stages: stages()}
	})
	if err != nil {
		return fmt.Errorf("release: start server: %w\n%s", err, releaseLog.String())
	}
	fx.Cleanup(func() { releaseSrv.Stop() })
	if err := setup(); err != nil {
		return fmt.Errorf("release: setup: %w", err)
	}
	return nil
})

func setup() error {
	cfg, err := releaseSrv.Config()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ctx := context.Background()
	t := &v1alpha1.Tenant{}
	t.Name = "shop"
	t.Spec.Environments = []string{"dev"}
	t.Spec.Admins = []v1alpha1.Subject{{Kind: "User", Name: "alice"}}
	if err := admin.Create(ctx, t); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	ucfg, err := releaseSrv.Inner().LoopbackConfig("alice")
	if err != nil {
		return err
	}
	if aliceKubeconfig, err = writeKubeconfig(ucfg, filepath.Join(dataDir, "alice.kubeconfig")); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, err := servertest.RunKubectl(kubectlBin, dataDir, aliceKubeconfig, "", "auth", "can-i", "patch", "releases.kubeos.dev", "-n", ns)
		if err == nil && strings.TrimSpace(out) == "yes" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("alice cannot patch releases in %s: %q %v", ns, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeKubeconfig(cfg *rest.Config, path string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "user", Namespace: ns}
	kc.CurrentContext = "kube"
	return path, clientcmd.WriteToFile(*kc, path)
}

// releaseKubectl runs kubectl 1.33 as alice (PATH has kubectl-kube).
func releaseKubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return servertest.RunKubectl(kubectlBin, t.TempDir(), aliceKubeconfig, stdin, args...)
}

// apply applies yaml as alice; the test fails when it is refused.
func apply(t *testing.T, yaml string) {
	t.Helper()
	if out, errOut, err := releaseKubectl(t, yaml, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

// releaseEventually polls f until it returns nil (deadline d), reporting the last error.
func releaseEventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	servertest.Eventually(t, d, 200*time.Millisecond, f)
}

func get[T client.Object](t *testing.T, obj T, name string) T {
	t.Helper()
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return obj
}
