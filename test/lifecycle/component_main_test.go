package lifecycle

// The component suite tests the Component kind end to end against its own in-process server
// with simulated nodes (pods go Running/Ready on them; a stage makes the pods of Component
// "crashy" crash-loop) and a real redis-server registered as the default Redis entry, so a
// Cache's connection Secret is real: a tenant's user applies Components with kubectl 1.33
// and gets Deployments, StatefulSets, Jobs, CronJobs, Services and HPAs with the
// connection injected; bad input is refused at admission with field paths under spec.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/internal/dataservices/servers"
	"kubeos.dev/kube/internal/dataservices/servers/testservers"
	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
	"kubeos.dev/kube/internal/simnode"
	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

var (
	componentSrv     *servertest.Server
	componentLog     servertest.Buffer
	componentDataDir string
	componentAdmin   client.Client
	rd               *testservers.Redis
	componentKubectl string
	// componentAliceKubeconfig is tenant acme's admin; acmeNS its namespace.
	componentAliceKubeconfig string
)

const acmeNS = "acme-dev"

// crashComponent is the Component whose pods crash-loop on the simulated nodes.
const crashComponent = "crashy"

func componentStages() []simnode.Stage {
	crash := simnode.Stage{Name: "crash", Selector: simnode.Selector{
		MatchLabels: map[string]string{v1alpha1.LabelComponent: crashComponent},
		MatchExpressions: []simnode.Expression{
			{Key: ".metadata.deletionTimestamp", Operator: "DoesNotExist"},
			{Key: ".status.containerStatuses.state", Operator: "In", Values: []string{"running"}}}},
		Delay: metav1.Duration{Duration: 500 * time.Millisecond}, Next: simnode.Next{Containers: simnode.CrashLoopBackOff, ExitCode: 1}}
	return append([]simnode.Stage{crash}, simnode.DefaultStages(2*time.Second)...)
}

var componentSuite = servertest.NewFixture("component", func(fx *servertest.Fixture) (err error) {
	main := &testservers.Main{}
	fx.Cleanup(main.Close)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	dir, err := servertest.TempDir()
	if err != nil {
		return err
	}
	componentDataDir = dir
	main.Cleanup(func() { os.RemoveAll(dir) })
	rd = testservers.StartRedis(main)
	var logs io.Writer = &componentLog
	if os.Getenv("COMPONENT_TEST_LOG") != "" {
		logs = os.Stderr
	}
	componentSrv, err = servertest.StartWith(filepath.Join(dir, "kube"), logs, func(o *server.Options) {
		o.SimNodes = simnode.Options{Nodes: 3, Stages: componentStages()}
	})
	if err != nil {
		return fmt.Errorf("start server: %w\n%s", err, componentLog.String())
	}
	fx.Cleanup(func() { componentSrv.Stop() })
	fx.Cleanup(func() {
		if fx.Failed() {
			fmt.Fprintf(os.Stderr, "--- component server log (last 150 lines) ---\n%s\n", tail(componentLog.String(), 150))
		}
	})
	if err := componentSetup(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
})

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func componentSetup() error {
	var err error
	if componentKubectl, err = servertest.FindKubectl("1.33"); err != nil {
		return err
	}
	cfg, err := componentSrv.Config()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	if componentAdmin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ctx := context.Background()
	s := &corev1.Secret{Type: servers.SecretType, Data: map[string][]byte{servers.KeyURL: []byte(rd.URL)}}
	s.Namespace, s.Name = servers.Namespace, "redis-main"
	s.Labels = map[string]string{servers.LabelKind: servers.Redis}
	s.Annotations = map[string]string{servers.AnnotationDefault: "true"}
	if err := componentAdmin.Create(ctx, s); err != nil {
		return fmt.Errorf("register redis: %w", err)
	}
	t := &v1alpha1.Tenant{}
	t.Name = "acme"
	t.Spec.Environments = []string{"dev"}
	t.Spec.Admins = []v1alpha1.Subject{{Kind: "User", Name: "alice"}}
	if err := componentAdmin.Create(ctx, t); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if componentAliceKubeconfig, err = kubeconfigFor("alice"); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, err := servertest.RunKubectl(componentKubectl, componentDataDir, componentAliceKubeconfig, "", "auth", "can-i", "create", "components.kubeos.dev", "-n", acmeNS)
		if err == nil && strings.TrimSpace(out) == "yes" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("alice cannot create components in %s: %q %v", acmeNS, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Pods are admitted once the namespace's ServiceAccount exists.
	for {
		var sa corev1.ServiceAccount
		if err := componentAdmin.Get(ctx, client.ObjectKey{Namespace: acmeNS, Name: "default"}, &sa); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no default ServiceAccount in %s", acmeNS)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func kubeconfigFor(user string, groups ...string) (string, error) {
	cfg, err := componentSrv.Inner().LoopbackConfig(user, groups...)
	if err != nil {
		return "", err
	}
	return componentWriteKubeconfig(cfg, filepath.Join(componentDataDir, user+".kubeconfig"))
}

func componentWriteKubeconfig(cfg *rest.Config, path string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kube"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kube"] = &clientcmdapi.Context{Cluster: "kube", AuthInfo: "user"}
	kc.CurrentContext = "kube"
	return path, clientcmd.WriteToFile(*kc, path)
}

// alice runs kubectl 1.33 as tenant acme's admin.
func alice(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	return servertest.RunKubectl(componentKubectl, t.TempDir(), componentAliceKubeconfig, stdin, args...)
}

// componentApply applies yaml as alice; the test fails when it is refused.
func componentApply(t *testing.T, yaml string) {
	t.Helper()
	if _, errOut, err := alice(t, yaml, "-n", acmeNS, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v: %s", err, errOut)
	}
}

// refused creates yaml as alice and wants it refused with an error containing each of want.
func refused(t *testing.T, yaml string, want ...string) {
	t.Helper()
	_, errOut, err := alice(t, yaml, "-n", acmeNS, "create", "-f", "-")
	if err == nil {
		t.Fatalf("created; want refused with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Fatalf("refused with %q; want it to contain %q", errOut, w)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitComponent polls Component name until ok accepts it.
func waitComponent(t *testing.T, name string, d time.Duration, what string, ok func(c *v1alpha1.Component) bool) *v1alpha1.Component {
	t.Helper()
	var last v1alpha1.Component
	deadline := time.Now().Add(d)
	for {
		err := componentAdmin.Get(context.Background(), client.ObjectKey{Namespace: acmeNS, Name: name}, &last)
		if err == nil && ok(&last) {
			return &last
		}
		if time.Now().After(deadline) {
			t.Fatalf("component %s: not %s after %s: err %v status %+v", name, what, d, err, last.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func componentActive(c *v1alpha1.Component) bool {
	return c.Status.Phase == "Active" && c.Status.ObservedGeneration == c.Generation
}

func componentCondition(c *v1alpha1.Component, typ string) *metav1.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// gone waits until obj (with its namespace and name set) no longer exists.
func gone(t *testing.T, obj client.Object, d time.Duration) {
	t.Helper()
	servertest.Eventually(t, d, 100*time.Millisecond, func() error {
		err := componentAdmin.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if err == nil {
			return fmt.Errorf("%T %s still exists", obj, obj.GetName())
		}
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		return nil
	})
}
