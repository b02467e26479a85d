package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server/servertest"
)

const componentStatusWarning = "v1 ComponentStatus is deprecated in v1.19+"

// TestComponentStatuses: `kubectl get componentstatuses` (and `cs`) with kubectl 1.27 and
// 1.33 lists etcd-0, the scheduler and the controller manager as Healthy once the server's
// scheduler and controllers lead, with upstream's columns and deprecation warning; get,
// selectors and the verbs ComponentStatus does not have answer as kube-apiserver's.
func TestComponentStatuses(t *testing.T) {
	apiSuite.Need(t)
	cs := kubernetes.NewForConfigOrDie(adminConfig(t))
	ctx := context.Background()
	// The scheduler and controllers take their Leases moments after the server starts.
	servertest.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		l, err := cs.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var names []string
		for _, c := range l.Items {
			names = append(names, c.Name)
			if len(c.Conditions) != 1 || c.Conditions[0].Type != corev1.ComponentHealthy || c.Conditions[0].Status != corev1.ConditionTrue || c.Conditions[0].Message != "ok" {
				return fmt.Errorf("%s: %+v", c.Name, c.Conditions)
			}
		}
		if strings.Join(names, ",") != "scheduler,controller-manager,etcd-0" {
			return fmt.Errorf("names %v", names)
		}
		return nil
	})

	for _, v := range []string{"1.27", "1.33"} {
		bin, err := findKubectl(v)
		if err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		for _, resource := range []string{"componentstatuses", "cs"} {
			// Under a heavy load a Lease can lapse between the wait above and this read
			// (the row then says "no leader"); the rows are read again until they settle.
			want := []string{"NAME STATUS MESSAGE ERROR", "scheduler Healthy ok", "controller-manager Healthy ok", "etcd-0 Healthy ok"}
			servertest.Eventually(t, time.Minute, 500*time.Millisecond, func() error {
				out, errOut, err := servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "get", resource)
				if err != nil {
					return fmt.Errorf("kubectl.%s get %s: %v\n%s", v, resource, err, errOut)
				}
				if !strings.Contains(errOut, "Warning: "+componentStatusWarning) {
					return fmt.Errorf("kubectl.%s get %s: stderr %q, want the deprecation warning", v, resource, errOut)
				}
				var rows []string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					rows = append(rows, strings.Join(strings.Fields(l), " "))
				}
				if strings.Join(rows, "|") != strings.Join(want, "|") {
					return fmt.Errorf("kubectl.%s get %s:\n%s\nwant rows %q", v, resource, out, want)
				}
				return nil
			})
		}
		out, errOut, err := servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "get", "cs", "etcd-0", "-o", "json")
		var one corev1.ComponentStatus
		if err != nil || json.Unmarshal([]byte(out), &one) != nil || one.Name != "etcd-0" || one.Kind != "ComponentStatus" || one.APIVersion != "v1" ||
			len(one.Conditions) != 1 || one.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("kubectl.%s get cs etcd-0 -o json: %v\n%s%s", v, err, out, errOut)
		}
		_, errOut, err = servertest.RunKubectl(bin, home, srv.Kubeconfig, "", "get", "cs", "nope")
		if err == nil || !strings.Contains(errOut, `componentstatus "nope" not found`) {
			t.Errorf("kubectl.%s get cs nope: %v %q", v, err, errOut)
		}
	}

	// The wire: every answer carries the warning; only get and list are served; the list
	// honours selectors and carries no resourceVersion; there is no namespaced form.
	r := mustDo(t, "GET", "/api/v1/componentstatuses?fieldSelector=metadata.name%3Detcd-0", "", "", http.StatusOK)
	var list corev1.ComponentStatusList
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "etcd-0" || list.Kind != "ComponentStatusList" || list.ResourceVersion != "" {
		t.Errorf("list by name: %v %s", err, r.body)
	}
	if w := r.header.Get("Warning"); !strings.Contains(w, componentStatusWarning) {
		t.Errorf("Warning header %q", w)
	}
	r = mustDo(t, "GET", "/api/v1/componentstatuses?labelSelector=a%3Db", "", "", http.StatusOK)
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) != 0 {
		t.Errorf("list by label: %v %s", err, r.body)
	}
	r = mustDo(t, "GET", "/api/v1/componentstatuses/nope", "", "", http.StatusNotFound)
	if st := decodeStatus(t, r); st.Message != `componentstatus "nope" not found` || st.Reason != metav1.StatusReasonNotFound {
		t.Errorf("get nope: %s", r.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/componentstatuses", `{"apiVersion":"v1","kind":"ComponentStatus","metadata":{"name":"x"}}`},
		{"DELETE", "/api/v1/componentstatuses/etcd-0", ""},
		{"GET", "/api/v1/componentstatuses?watch=true", ""},
	} {
		r := mustDo(t, c.method, c.path, "application/json", c.body, http.StatusMethodNotAllowed)
		decodeStatus(t, r)
	}
	mustDo(t, "GET", "/api/v1/namespaces/default/componentstatuses", "", "", http.StatusNotFound)
	for _, q := range []string{"labelSelector=a%20in", "fieldSelector=spec.x%3Dy"} {
		decodeStatus(t, mustDo(t, "GET", "/api/v1/componentstatuses?"+q, "", "", http.StatusBadRequest))
	}
	// Protobuf, as client-go's typed clients may ask.
	pcfg := adminConfig(t)
	pcfg.ContentType, pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"
	pl, err := kubernetes.NewForConfigOrDie(pcfg).CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	if err != nil || len(pl.Items) != 3 || pl.Items[2].Name != "etcd-0" || len(pl.Items[2].Conditions) != 1 {
		t.Errorf("protobuf list: %v %+v", err, pl)
	}
	// Table output for one object, as kubectl asks for it.
	r = do(t, admin, "GET", "/api/v1/componentstatuses/scheduler", "", nil, "Accept: application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(r.body, &table); err != nil || len(table.ColumnDefinitions) != 4 || len(table.Rows) != 1 ||
		fmt.Sprint(table.Rows[0].Cells) != "[scheduler Healthy ok ]" {
		t.Errorf("table: %v %s", err, r.body)
	}
}
