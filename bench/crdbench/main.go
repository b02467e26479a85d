// Command crdbench runs the CRD benchmarks of bench/README.md ("CRDs") against one API
// server (Kube or upstream apiextensions-apiserver, through a kubeconfig), or P2 against
// Kube's store alone (-store); bench/crd.sh runs it on both servers in one run and prints
// the ratios. Results are JSON lines on stdout.
//
//   - P1 (-crds N): create N distinct CRDs (each its own group; a schema with an enum,
//     bounds, a pattern, defaults, a CEL rule, status and scale subresources, printer
//     columns) with -clients clients; report when the last create returned, when the last
//     CRD became Established (seen through a watch, so that the measurement does not list
//     thousands of CRDs over and over), and the RSS of -pids afterwards.
//   - api-resources (-kubectl PATH): a cold `kubectl api-resources` (empty cache dir), 3 times.
//   - P2 (-crs N): create one CRD with a schema and two CEL rules, then N custom resources
//     of it with -clients clients; report the rate.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"kubeos.dev/kube/bench/crdload"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"kubeos.dev/kube/internal/etcd"
	"kubeos.dev/kube/internal/storage"
)

// p2CRD has a schema and two CEL rules.
const p2CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.p2.%[1]s.bench.example.com}
spec:
  group: p2.%[1]s.bench.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size, min, max]
            x-kubernetes-validations:
            - {rule: "self.min <= self.max", message: "min must not exceed max"}
            - {rule: "self.size >= self.min && self.size <= self.max", message: "size out of range"}
            properties:
              size: {type: integer, minimum: 0, maximum: 1000}
              min: {type: integer, minimum: 0}
              max: {type: integer, maximum: 1000}
              color: {type: string, enum: [red, green, blue], default: red}
              labels: {type: object, additionalProperties: {type: string}}
`

type result struct {
	Target  string  `json:"target"`
	Op      string  `json:"op"`
	N       int     `json:"n,omitempty"`
	Clients int     `json:"clients,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	// P1.
	CreatedS     float64 `json:"created_s,omitempty"`
	EstablishedS float64 `json:"established_s,omitempty"`
	AfterLastS   float64 `json:"after_last_create_s,omitempty"`
	RSSMB        float64 `json:"rss_mb,omitempty"`
	RSSBeforeMB  float64 `json:"rss_before_mb,omitempty"`
	// P2.
	Rate   float64 `json:"rate,omitempty"`
	Errors int64   `json:"errors,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "API server to measure")
	useStore := flag.Bool("store", false, "P2 against Kube's store on an embedded etcd (no API server)")
	name := flag.String("name", "", "label for the results")
	pids := flag.String("pids", "", "comma-separated pids whose RSS is summed after P1")
	crds := flag.Int("crds", 0, "P1: CRDs to create (0: skip)")
	crs := flag.Int("crs", 0, "P2: custom resources to create (0: skip)")
	clients := flag.Int("clients", 8, "concurrent clients")
	kubectl := flag.String("kubectl", "", "kubectl binary: time a cold `kubectl api-resources` after P1")
	flag.Parse()
	run := strconv.FormatInt(time.Now().UnixNano()%1000000, 36)
	ctx := context.Background()
	if *useStore {
		check(storeP2(ctx, *name, *crs, *clients))
		return
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "give -kubeconfig or -store")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	cfg.QPS, cfg.Burst, cfg.ContentType = -1, 0, "application/json"
	ext, err := apiextclient.NewForConfig(cfg)
	check(err)
	dyn, err := dynamic.NewForConfig(cfg)
	check(err)
	if *crds > 0 {
		r, err := p1(ctx, ext, run, *crds, *clients)
		check(err)
		r.Target, r.RSSMB = *name, rssMB(*pids)
		emit(r)
	}
	if *kubectl != "" {
		// Three cold runs (each with an empty cache dir): the time is mostly kubectl writing
		// one cache file per group-version, which swings with the machine's load.
		for range 3 {
			dir, err := os.MkdirTemp("", "crdbench-kubecache-")
			check(err)
			start := time.Now()
			cmd := exec.Command(*kubectl, "--kubeconfig", *kubeconfig, "--cache-dir", dir, "api-resources", "-o", "name")
			out, err := cmd.Output()
			if err != nil {
				fmt.Fprintf(os.Stderr, "kubectl api-resources: %v\n", err)
			}
			elapsed := time.Since(start)
			os.RemoveAll(dir)
			emit(result{Target: *name, Op: "api-resources", N: strings.Count(string(out), "\n"), Seconds: elapsed.Seconds()})
		}
	}
	if *crs > 0 {
		r, err := p2(ctx, ext, dyn, run, *crs, *clients)
		check(err)
		r.Target = *name
		emit(r)
	}
}

func p1(ctx context.Context, ext apiextclient.Interface, run string, n, clients int) (result, error) {
	crdsAPI := ext.ApiextensionsV1().CustomResourceDefinitions()
	list, err := crdsAPI.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return result{}, err
	}
	w, err := crdsAPI.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return result{}, err
	}
	defer w.Stop()
	suffix := ".bench.example.com"
	start := time.Now()
	allEstablished := make(chan time.Time, 1)
	go func() {
		est := map[string]bool{}
		for ev := range w.ResultChan() {
			crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok || ev.Type == watch.Deleted || !strings.HasSuffix(crd.Name, "."+run+suffix) {
				continue
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					est[crd.Name] = true
				}
			}
			if len(est) == n {
				allEstablished <- time.Now()
				return
			}
		}
	}()
	if _, err := crdload.Parallel(n, clients, func(i int) error {
		crd, err := crdload.DatabaseCRD(i, run)
		if err != nil {
			return err
		}
		_, err = crdsAPI.Create(ctx, crd, metav1.CreateOptions{})
		return err
	}); err != nil {
		return result{}, err
	}
	created := time.Since(start)
	var done time.Time
	select {
	case done = <-allEstablished:
	case <-time.After(20 * time.Minute):
		return result{}, fmt.Errorf("not all %d CRDs Established after 20 minutes", n)
	}
	est := done.Sub(start)
	return result{Op: "p1", N: n, Clients: clients, CreatedS: created.Seconds(), EstablishedS: est.Seconds(), AfterLastS: max(0, (est - created).Seconds())}, nil
}

func p2(ctx context.Context, ext apiextclient.Interface, dyn dynamic.Interface, run string, n, clients int) (result, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, p2CRD, run), crd); err != nil {
		return result{}, err
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: "widgets"}
	obj := func(i int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crd.Spec.Group + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w-%05d", i), "namespace": "default"},
			"spec":     map[string]any{"size": int64(i % 100), "min": int64(0), "max": int64(100), "labels": map[string]any{"app": "bench"}},
		}}
	}
	// Wait until the resource is served (the first create succeeds); not timed.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj(n), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !(apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)) {
			return result{}, fmt.Errorf("warm-up create: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	failed, err := crdload.Parallel(n, clients, func(i int) error {
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj(i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "p2 create:", err)
	}
	d := time.Since(start)
	return result{Op: "p2", N: n, Clients: clients, Seconds: d.Seconds(), Rate: float64(n) / d.Seconds(), Errors: failed}, nil
}

// storeP2 creates n Widget-like objects with Kube's storage.Store on an embedded etcd
// member (fsync on, as the servers'): what the API path costs on top of etcd.
func storeP2(ctx context.Context, name string, n, clients int) error {
	dir, err := os.MkdirTemp("", "crdbench-etcd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m, err := etcd.StartMember(ctx, etcd.MemberOptions{DataDir: dir})
	if err != nil {
		return err
	}
	defer m.Close()
	cli := m.Client() // in-process, as kube server talks to its embedded member
	defer cli.Close()
	s := storage.New(cli)
	start := time.Now()
	failed, _ := crdload.Parallel(n, clients, func(i int) error {
		nm := fmt.Sprintf("w-%05d", i)
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "p2.bench.example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": nm, "namespace": "default", "uid": fmt.Sprintf("uid-%d", i), "creationTimestamp": time.Now().UTC().Format(time.RFC3339)},
			"spec":     map[string]any{"size": int64(i % 100), "min": int64(0), "max": int64(100), "color": "red", "labels": map[string]any{"app": "bench"}},
		}}
		_, err := s.Create(ctx, storage.ResourcePrefix("p2.bench.example.com", "widgets")+"default/"+nm, o)
		return err
	})
	d := time.Since(start)
	emit(result{Target: name, Op: "p2", N: n, Clients: clients, Seconds: d.Seconds(), Rate: float64(n) / d.Seconds(), Errors: failed})
	return nil
}

func rssMB(pids string) float64 {
	var total float64
	for _, p := range strings.Split(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		b, err := os.ReadFile("/proc/" + p + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				total += kb / 1024
			}
		}
	}
	return total
}

func emit(r result) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdbench:", err)
		os.Exit(1)
	}
}
