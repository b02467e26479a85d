package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// scenario is one script run against each side in a namespace of its own.
type scenario struct {
	name      string
	kinds     []kind // watched and listed at each checkpoint (Events are always watched)
	keepNodes bool   // node names are part of what is compared
	// nodes: the scenario watches these Nodes and compares them
	nodes []string
	// cluster: cluster-scoped kinds among kinds are kept only under these names
	cluster []string
	run     func(ctx context.Context, e *env) error
}

// keeps says whether an object of kind k named name is the scenario's: every namespaced
// one (the namespace is the scenario's), Nodes in nodes, other cluster-scoped ones in
// cluster.
func (sc *scenario) keeps(k, name string) bool {
	switch k {
	case "Node":
		return contains(sc.nodes, name)
	case "PersistentVolume", "Namespace":
		return contains(sc.cluster, name)
	}
	return true
}

// checkpoint is what a client lists at one named point of a scenario.
type checkpoint struct {
	name string
	objs []*unstructured.Unstructured
}

// env is one scenario's run on one side.
type env struct {
	s     *side
	ns    string
	sc    *scenario
	cps   []checkpoint
	calls []string // answers to the requests the scenario makes, in order
	rec   *recorder
}

// result is what one side showed during a scenario.
type result struct {
	cps   []checkpoint
	calls []string
	recs  []rec
	err   error
	took  time.Duration
}

func runScenario(ctx context.Context, s *side, sc *scenario) result {
	t0 := time.Now()
	ns := "o-" + sc.name
	e := &env{s: s, ns: ns, sc: sc}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	err := e.setup(ctx, rctx)
	if err == nil {
		err = sc.run(ctx, e)
	}
	var recs []rec
	if e.rec != nil {
		// The last events (a checkpoint's status writes) have a moment to arrive.
		time.Sleep(2 * time.Second)
		stop()
		e.rec.wg.Wait()
		recs = e.rec.snapshot()
	}
	// The namespace goes in the background: the next scenario has its own.
	_ = s.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	return result{cps: e.cps, calls: e.calls, recs: recs, err: err, took: time.Since(t0)}
}

func (e *env) setup(ctx, rctx context.Context) error {
	if _, err := e.s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	kinds := append([]kind{kEvent}, e.sc.kinds...)
	if len(e.sc.nodes) > 0 {
		kinds = append(kinds, kNode)
	}
	keep := func(k string, o *unstructured.Unstructured) bool { return e.sc.keeps(k, o.GetName()) }
	var err error
	if e.rec, err = record(rctx, e.s, e.ns, kinds, keep); err != nil {
		return err
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	return e.until(ctx, time.Minute, "default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := e.s.cs.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// until waits for cond, naming what it waited for when it does not come.
func (e *env) until(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	if err := poll(ctx, timeout, cond); err != nil {
		return fmt.Errorf("%s: waiting for %s: %w", e.s.name, what, err)
	}
	return nil
}

// checkpoint lists the scenario's kinds (and Nodes) as they are now.
func (e *env) checkpoint(ctx context.Context, name string) error {
	cp := checkpoint{name: name}
	kinds := e.sc.kinds
	if len(e.sc.nodes) > 0 {
		kinds = append(kinds, kNode)
	}
	for _, k := range kinds {
		ri := e.s.dyn.Resource(k.gvr)
		var l *unstructured.UnstructuredList
		var err error
		if k.namespaced {
			l, err = ri.Namespace(e.ns).List(ctx, metav1.ListOptions{})
		} else {
			l, err = ri.List(ctx, metav1.ListOptions{})
		}
		if err != nil {
			return fmt.Errorf("%s: checkpoint %s: list %s: %w", e.s.name, name, k.gvr.Resource, err)
		}
		for i := range l.Items {
			o := &l.Items[i]
			if !e.sc.keeps(k.name, o.GetName()) {
				continue
			}
			o.SetKind(k.name)
			cp.objs = append(cp.objs, o)
		}
	}
	e.cps = append(e.cps, cp)
	return nil
}

// call records the answer to a request the scenario made (its code, reason and message
// when refused).
func (e *env) call(what string, err error) {
	if err == nil {
		e.calls = append(e.calls, what+": ok")
		return
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		e.calls = append(e.calls, fmt.Sprintf("%s: %d %s: %s", what, s.Code, s.Reason, s.Message))
		return
	}
	e.calls = append(e.calls, what+": "+err.Error())
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
