package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"kubeos.dev/kube/internal/ctl/opsapi"
	kubeclient "kubeos.dev/kube/pkg/client/clientset/versioned"
)

// ManagedGroup is the API group of the lifecycle-managed kinds.
const ManagedGroup = "kubeos.dev"

// NewCommand returns the command tree named use ("ctl" under kube, "kubectl kube" as a
// plugin) with kubectl's global flags (--kubeconfig, --context, -n, --as, ...).
func NewCommand(use string, streams genericiooptions.IOStreams) *cobra.Command {
	e := &env{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:           use,
		Short:         "operator tooling for lifecycle-managed kinds: health, tree, why, why-stuck, audit, wait",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	e.flags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(newHealthCommand(e), newTreeCommand(e), newWhyCommand(e), newWhyStuckCommand(e), newAuditCommand(e), newWaitCommand(e),
		newPromoteCommand(e), newAbortCommand(e))
	return cmd
}

// env is what every command shares: flags, streams and the clients built from them.
type env struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

func (e *env) config() (*rest.Config, error) { return e.flags.ToRESTConfig() }

// namespace is -n, or the kubeconfig context's namespace, or "default".
func (e *env) namespace() (string, error) {
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

func (e *env) dynamic() (dynamic.Interface, error) {
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// clientset is the generated typed client of the kubeos.dev kinds (pkg/client), for commands
// about one known kind; commands about any lifecycle-managed kind read them dynamically.
func (e *env) clientset() (kubeclient.Interface, error) {
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	return kubeclient.NewForConfig(cfg)
}

// ops is a client of the ops API (opsapi).
func (e *env) ops() (*rest.RESTClient, error) {
	cfg, err := e.config()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &schema.GroupVersion{Group: opsapi.Group, Version: opsapi.Version}
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(cfg)
}

// target is one object named on the command line.
type target struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	namespace  string
	name       string
}

// String is how kubectl names it: credentials.kubeos.dev/db.
func (t target) String() string { return t.gvr.GroupResource().String() + "/" + t.name }

// resolve turns KIND/NAME (or KIND NAME) into a target, with kubectl's errors for unknown
// kinds; the object itself is not read.
func (e *env) resolve(args []string) (target, error) {
	var kindArg, name string
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		kindArg, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2:
		kindArg, name = args[0], args[1]
	default:
		return target{}, fmt.Errorf("want KIND/NAME (or KIND NAME), got %q", strings.Join(args, " "))
	}
	if kindArg == "" || name == "" {
		return target{}, fmt.Errorf("want KIND/NAME, got %q", strings.Join(args, " "))
	}
	m, err := e.flags.ToRESTMapper()
	if err != nil {
		return target{}, err
	}
	gr := schema.ParseGroupResource(strings.ToLower(kindArg))
	gvk, err := m.KindFor(gr.WithVersion(""))
	if err != nil {
		return target{}, fmt.Errorf("the server doesn't have a resource type %q", kindArg)
	}
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return target{}, fmt.Errorf("the server doesn't have a resource type %q", kindArg)
	}
	if gvk.Group != ManagedGroup {
		return target{}, fmt.Errorf("%s is not a lifecycle-managed kind (kube ctl reads the %s kinds)", mapping.Resource.GroupResource(), ManagedGroup)
	}
	t := target{gvr: mapping.Resource, kind: gvk.Kind, name: name, namespaced: mapping.Scope.Name() == "namespace"}
	if t.namespaced {
		if t.namespace, err = e.namespace(); err != nil {
			return target{}, err
		}
	}
	return t, nil
}

// get reads the target with the user's rights (kubectl's NotFound and Forbidden errors).
func (e *env) get(ctx context.Context, t target) (*unstructured.Unstructured, error) {
	dc, err := e.dynamic()
	if err != nil {
		return nil, err
	}
	if t.namespaced {
		return dc.Resource(t.gvr).Namespace(t.namespace).Get(ctx, t.name, metav1.GetOptions{})
	}
	return dc.Resource(t.gvr).Get(ctx, t.name, metav1.GetOptions{})
}

// graph walks the dependency graph from t through the ops API.
func (e *env) graph(ctx context.Context, t target, direction string, depth int) (*opsapi.Graph, error) {
	c, err := e.ops()
	if err != nil {
		return nil, err
	}
	req := c.Get().Resource(opsapi.ResourceGraphs).Name(t.name).Param("kind", t.kind).Param("direction", direction)
	if t.namespaced {
		req = req.Namespace(t.namespace)
	}
	if depth > 0 {
		req = req.Param("depth", fmt.Sprint(depth))
	}
	var g opsapi.Graph
	if err := decode(req.Do(ctx), &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// decode reads a JSON answer of the ops API into v (API errors as *StatusError).
func decode(res rest.Result, v any) error {
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	return jsonUnmarshal(raw, v)
}
