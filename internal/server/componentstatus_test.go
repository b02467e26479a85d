package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/probe"
)

func TestComponentStatusConditions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		d := int32(10)
		l.Spec.LeaseDurationSeconds = &d
		l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewedAgo)}
		return l
	}
	live := map[string]*coordinationv1.Lease{
		"kube-scheduler": lease("s1", time.Second), "kube-a": lease("s1", 2*time.Second), "kube-b": lease("s2", 9*time.Second),
	}
	with := func(name string, l *coordinationv1.Lease) map[string]*coordinationv1.Lease {
		m := map[string]*coordinationv1.Lease{}
		for k, v := range live {
			m[k] = v
		}
		if l == nil {
			delete(m, name)
		} else {
			m[name] = l
		}
		return m
	}
	probed := 0
	refused := func(int) (probe.Result, string, error) {
		probed++
		return probe.Unknown, "", errors.New(`Get "https://127.0.0.1:10259/healthz": connection refused`)
	}
	answers := func(int) (probe.Result, string, error) { probed++; return probe.Success, "ok", nil }
	for _, tc := range []struct {
		name          string
		leases        map[string]*coordinationv1.Lease
		external      bool // --scheduler=false and --disable-workload-controllers
		probe         func(int) (probe.Result, string, error)
		scheduler, cm corev1.ConditionStatus
		errHas        string // in the controller manager's or else the scheduler's error
		probes        int
	}{
		{name: "all lead", leases: live, scheduler: "True", cm: "True"},
		{name: "a controller's Lease expired", leases: with("kube-b", lease("s2", 11*time.Second)), scheduler: "True", cm: "False",
			errHas: "kube-system/kube-b held by s2 was last renewed 11s ago (its duration is 10s)"},
		{name: "a controller never led", leases: with("kube-a", nil), scheduler: "True", cm: "False", errHas: "kube-system/kube-a does not exist"},
		{name: "released scheduler Lease", leases: with("kube-scheduler", lease("", time.Second)), scheduler: "False", cm: "True", errHas: "kube-scheduler is not held"},
		// External components: a live Lease is enough, else upstream's probe decides.
		{name: "external scheduler leads", leases: live, external: true, probe: refused, scheduler: "True", cm: "Unknown", errHas: "connection refused", probes: 1},
		{name: "external components answer", leases: with("kube-scheduler", nil), external: true, probe: answers, scheduler: "True", cm: "True", probes: 2},
		{name: "external components down", leases: with("kube-scheduler", nil), external: true, probe: refused, scheduler: "Unknown", cm: "Unknown", errHas: "connection refused", probes: 2},
		{name: "external controller manager leads", leases: with("kube-controller-manager", lease("kcm", 0)), external: true, probe: refused, scheduler: "True", cm: "True"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probed = 0
			c := &componentStatuses{now: func() time.Time { return now },
				leases:            func(context.Context) (map[string]*coordinationv1.Lease, error) { return tc.leases, nil },
				etcd:              []func(context.Context) error{func(context.Context) error { return nil }},
				probe:             tc.probe,
				schedulerExternal: tc.external, controllersExternal: tc.external,
				controllerLeases: []string{"kube-a", "kube-b"},
			}
			objs, err := c.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]corev1.ComponentCondition{}
			for _, o := range objs {
				var s corev1.ComponentStatus
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil || len(s.Conditions) != 1 {
					t.Fatalf("%v %v", err, o.Object)
				}
				got[s.Name] = s.Conditions[0]
			}
			if got["scheduler"].Status != tc.scheduler || got["controller-manager"].Status != tc.cm || got["etcd-0"].Status != "True" {
				t.Fatalf("conditions %+v", got)
			}
			errText := got["controller-manager"].Error
			if tc.cm == "True" {
				errText = got["scheduler"].Error
			}
			if tc.errHas != "" && !strings.Contains(errText, tc.errHas) {
				t.Errorf("error %q, want it to contain %q", errText, tc.errHas)
			}
			for name, cond := range got {
				if (cond.Status == "True") != (cond.Message == "ok") || (cond.Status == "True") != (cond.Error == "") {
					t.Errorf("%s: %+v", name, cond)
				}
			}
			if probed != tc.probes {
				t.Errorf("%d probes, want %d", probed, tc.probes)
			}
		})
	}

	c := &componentStatuses{now: time.Now, etcd: []func(context.Context) error{
		func(context.Context) error { return nil },
		func(context.Context) error { return errors.New("etcdserver: request timed out") },
	},
		leases: func(context.Context) (map[string]*coordinationv1.Lease, error) { return nil, errors.New("boom") }}
	// An override cluster is etcd-1; there is no etcd-2.
	o, err := c.Get(context.Background(), "etcd-1")
	if err != nil {
		t.Fatal(err)
	}
	if conds, _, _ := unstructuredConditions(o.Object); conds != "False/etcdserver: request timed out" {
		t.Errorf("etcd down: %s", conds)
	}
	if _, err := c.Get(context.Background(), "etcd-2"); !apierrors.IsNotFound(err) {
		t.Errorf("get etcd-2: %v", err)
	}
	o, err = c.Get(context.Background(), "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if conds, _, _ := unstructuredConditions(o.Object); !strings.HasPrefix(conds, "Unknown/reading the Leases of kube-system: boom") {
		t.Errorf("leases unreadable: %s", conds)
	}
	if _, err := c.Get(context.Background(), "nope"); !apierrors.IsNotFound(err) || err.Error() != `componentstatus "nope" not found` {
		t.Errorf("get nope: %v", err)
	}
}

// unstructuredConditions is "status/error" of the object's one condition.
func unstructuredConditions(obj map[string]any) (string, bool, error) {
	var s corev1.ComponentStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &s); err != nil || len(s.Conditions) != 1 {
		return "", false, err
	}
	return string(s.Conditions[0].Status) + "/" + s.Conditions[0].Error, true, nil
}
