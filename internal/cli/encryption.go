package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// newEncryptionCommand is `kube encryption rewrite`: after a change of
// --encryption-provider-config (a new key first, the old one still listed), every object of
// the listed resources is read and written back unchanged, so that the server stores it with
// the current writing key; then the old key can be removed. It is upstream's documented
// procedure (`kubectl get secrets -A -o json | kubectl replace -f -`) as one command.
func newEncryptionCommand(out io.Writer) *cobra.Command {
	enc := &cobra.Command{Use: "encryption", Short: "Encryption at rest maintenance"}
	var kubeconfig string
	var resources []string
	rewrite := &cobra.Command{
		Use:     "rewrite",
		Short:   "Rewrite every object of the given resources so that it is stored with the current encryption key",
		Example: `  kube encryption rewrite --kubeconfig ~/.local/share/kube/kubeconfig --resources secrets,configmaps,deployments.apps`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			dc, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			for _, r := range resources {
				gvr, err := parseResource(r)
				if err != nil {
					return err
				}
				n, err := RewriteResource(cmd.Context(), dc, gvr)
				if err != nil {
					return fmt.Errorf("%s: %w", r, err)
				}
				fmt.Fprintf(out, "%s: %d rewritten\n", r, n)
			}
			return nil
		},
	}
	f := rewrite.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of an admin (default: $KUBECONFIG)")
	f.StringSliceVar(&resources, "resources", []string{"secrets"}, "resources to rewrite: <resource>[.<group>][/<version>] (core and group resources use v1 unless given)")
	enc.AddCommand(rewrite)
	return enc
}

// parseResource reads "secrets", "deployments.apps" or "widgets.example.com/v2".
func parseResource(s string) (schema.GroupVersionResource, error) {
	rg, version, ok := strings.Cut(s, "/")
	if !ok {
		version = "v1"
	}
	res, group, _ := strings.Cut(rg, ".")
	if res == "" || version == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("--resources: %q is not <resource>[.<group>][/<version>]", s)
	}
	return schema.GroupVersionResource{Group: group, Version: version, Resource: res}, nil
}

// RewriteResource reads and writes back every object of gvr (a PUT of the unchanged object:
// the server re-encrypts values read with an old key). Objects that change or go meanwhile
// are retried or skipped. It returns how many objects were written.
func RewriteResource(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource) (int, error) {
	n := 0
	cont := ""
	for {
		list, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return n, err
		}
		for i := range list.Items {
			obj := &list.Items[i]
			ri := dc.Resource(gvr).Namespace(obj.GetNamespace())
			for attempt := 0; ; attempt++ {
				_, err := ri.Update(ctx, obj, metav1.UpdateOptions{})
				if err == nil {
					n++
					break
				}
				if apierrors.IsNotFound(err) {
					break
				}
				if !apierrors.IsConflict(err) || attempt >= 5 {
					return n, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
				}
				if obj, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
					if apierrors.IsNotFound(err) {
						break
					}
					return n, err
				}
			}
		}
		if cont = list.GetContinue(); cont == "" {
			return n, nil
		}
	}
}
