package sharedinformers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestLabelIndexedListersAnswerAsUpstream: for every selector shape upstream's controllers
// build (a Service's equality selector, a budget's matchLabels and matchExpressions, set
// requirements, selectors the index cannot narrow, Everything and Nothing), the indexed
// listers return the same objects as client-go's own, namespace by namespace; and they keep
// answering the same after objects change their labels and go away.
func TestLabelIndexedListersAnswerAsUpstream(t *testing.T) {
	var objs []runtime.Object
	for i := 0; i < 60; i++ {
		ls := map[string]string{"app": fmt.Sprintf("svc-%d", i%6), "tier": []string{"web", "db", "cache"}[i%3]}
		if i%4 == 0 {
			ls["app.kubernetes.io/name"] = "shop"
		}
		if i%10 == 0 {
			ls = nil
		}
		ns := []string{"a", "b"}[i%2]
		objs = append(objs,
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%d", i), Labels: ls}},
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s-%d", i), Labels: ls}})
	}
	cs := fake.NewSimpleClientset(objs...)
	f := informers.NewSharedInformerFactory(cs, 0)
	plain, plainSlices := f.Core().V1().Pods().Lister(), f.Discovery().V1().EndpointSlices().Lister()
	pods, err := LabelIndexedPods(f.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	// A second controller on the same shared informer: the index is there already.
	if _, err := LabelIndexedPods(f.Core().V1().Pods()); err != nil {
		t.Fatal(err)
	}
	sls, err := LabelIndexedEndpointSlices(f.Discovery().V1().EndpointSlices())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	parse := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	budget, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"svc-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	selectors := map[string]labels.Selector{
		"a Service's selector":           labels.Set{"app": "svc-2"}.AsSelectorPreValidated(),
		"two equalities":                 labels.Set{"app": "svc-3", "tier": "web"}.AsSelectorPreValidated(),
		"no match":                       labels.Set{"app": "svc-9"}.AsSelectorPreValidated(),
		"a budget's selector":            budget,
		"in, several values":             parse("tier in (web,cache)"),
		"== and a key with a prefix":     parse("app.kubernetes.io/name==shop,tier!=db"),
		"notin only (not narrowed)":      parse("tier notin (web)"),
		"exists only (not narrowed)":     parse("app"),
		"does not exist (not narrowed)":  parse("!app"),
		"exists, then equality":          parse("app.kubernetes.io/name,tier=cache"),
		"everything":                     labels.Everything(),
		"nothing":                        labels.Nothing(),
		"an equality on a missing label": parse("zone=eu"),
	}
	check := func(when string) {
		t.Helper()
		for name, sel := range selectors {
			for _, ns := range []string{"a", "b", "c"} {
				want, err := plain.Pods(ns).List(sel)
				if err != nil {
					t.Fatal(err)
				}
				got, err := pods.Lister().Pods(ns).List(sel)
				if err != nil {
					t.Fatal(err)
				}
				if w, g := podNames(want), podNames(got); !slices.Equal(w, g) {
					t.Errorf("%s: pods of %s, %s: got %v, want %v", when, ns, name, g, w)
				}
				wantS, _ := plainSlices.EndpointSlices(ns).List(sel)
				gotS, _ := sls.Lister().EndpointSlices(ns).List(sel)
				if w, g := sliceNames(wantS), sliceNames(gotS); !slices.Equal(w, g) {
					t.Errorf("%s: slices of %s, %s: got %v, want %v", when, ns, name, g, w)
				}
			}
		}
	}
	check("at start")

	// Labels change and objects go: the index follows the informer.
	inf := f.Core().V1().Pods().Informer()
	for i := 0; i < 60; i += 3 {
		ns := []string{"a", "b"}[i%2]
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%d", i), Labels: map[string]string{"app": "svc-2", "tier": "db"}}}
		if err := inf.GetStore().Update(p); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 60; i += 7 {
		if err := inf.GetStore().Delete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: []string{"a", "b"}[i%2], Name: fmt.Sprintf("p-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	check("after changes")
	if _, ok := inf.GetIndexer().GetIndexers()[LabelIndex]; !ok {
		t.Fatal("the informer has no label index")
	}
}

func podNames(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

func sliceNames(ss []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	slices.Sort(out)
	return out
}

// TestIndexKeysNarrowBySelectiveRequirement: the index reads the bucket of a requirement
// that narrows — not the managed-by label every slice of the controller carries, which the
// endpointslice controller's selector sorts first.
func TestIndexKeysNarrowBySelectiveRequirement(t *testing.T) {
	cases := []struct {
		sel  labels.Selector
		want []string
	}{
		{labels.Set{"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io", "kubernetes.io/service-name": "web"}.AsSelectorPreValidated(),
			[]string{"ns/kubernetes.io/service-name=web"}},
		{labels.Set{"app.kubernetes.io/managed-by": "helm"}.AsSelectorPreValidated(), []string{"ns/app.kubernetes.io/managed-by=helm"}},
		{labels.Set{"app": "a", "tier": "b"}.AsSelectorPreValidated(), []string{"ns/app=a"}},
		{labels.Everything(), nil},
	}
	for _, c := range cases {
		got, _ := indexKeys("ns", c.sel)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: keys %v, want %v", c.sel, got, c.want)
		}
	}
}
