// Command dashbench measures the operator dashboard (bench/README.md, "Dashboard") and takes
// its screenshots (docs/dashboard.md), in headless Chromium driven by chromedp against one
// in-process kube server.
//
//	dashbench -objects 10000            first paint of a kind list of that many Credentials
//	dashbench -screenshots docs         PNGs of the main views of a small scenario
//
// First paint is the browser's own first-contentful-paint (PerformanceObserver 'paint'),
// from the navigation's start, of /ui/kinds/credentials after login: the API-paged view (name
// order, 50 a page), and filtered or sorted ones (which the ops API's objects resource pages
// on the server). The server runs without the engine's controllers for the paint
// runs (NoEngine: 10,000 objects stay Pending, as ctlbench does) and with them for the
// screenshots. Results are JSON lines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kubeos.dev/kube/internal/server"
	"kubeos.dev/kube/internal/server/servertest"
)

func main() {
	objects := flag.Int("objects", 10000, "Credentials in the measured kind list")
	clients := flag.Int("clients", 32, "concurrent creating clients")
	runs := flag.Int("runs", 5, "timed page loads of each view")
	shots := flag.String("screenshots", "", "take the screenshots into this directory instead of measuring")
	chromium := flag.String("chromium", "/usr/bin/chromium", "the Chromium binary")
	flag.Parse()
	var err error
	if *shots != "" {
		err = screenshots(*shots, *chromium)
	} else {
		err = paint(*objects, *clients, *runs, *chromium)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashbench:", err)
		os.Exit(1)
	}
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kubeos.dev", Version: "v1alpha1", Resource: resource}
}

type env struct {
	ts  *servertest.Server
	cs  kubernetes.Interface
	dyn dynamic.Interface
	dir string
}

func start(noEngine bool) (*env, error) {
	dir, err := servertest.TempDir()
	if err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources: [{group: kubeos.dev}]\n  verbs: [create, update, patch, delete]\n- level: None\n"), 0o600); err != nil {
		return nil, err
	}
	ts, err := servertest.StartWith(filepath.Join(dir, "kube"), nil, func(o *server.Options) {
		o.NoEngine = noEngine
		// Creating the objects is not measured: skip etcd's fsyncs (the loaded machine's
		// disk made creates time out).
		o.EtcdUnsafeNoFsync = true
		o.AuditPolicyFile, o.AuditLogPath = policy, filepath.Join(dir, "audit.log")
	})
	if err != nil {
		return nil, err
	}
	cfg, err := ts.Config()
	if err != nil {
		return nil, err
	}
	e := &env{ts: ts, dir: dir}
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) stop() {
	e.ts.Stop()
	os.RemoveAll(e.dir)
}

// token is a token of a service account bound to clusterRole (in ns only when namespaced).
func (e *env) token(ctx context.Context, ns, name, clusterRole string, namespaced bool) (string, error) {
	if _, err := e.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	subj := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}
	ref := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole}
	var err error
	if namespaced {
		_, err = e.cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj, RoleRef: ref}, metav1.CreateOptions{})
	} else {
		_, err = e.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Subjects: subj, RoleRef: ref}, metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	exp := int64(3600)
	tr, err := e.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// browser starts headless Chromium with its own profile.
func browser(chromium string, width, height int) (context.Context, func(), error) {
	profile, err := os.MkdirTemp("", "dashbench-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.UserDataDir(profile), chromedp.Flag("ignore-certificate-errors", true), chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	stop := func() { cancelCtx(); cancelAlloc(); os.RemoveAll(profile) }
	if err := chromedp.Do(ctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("start chromium: %w", err)
	}
	return ctx, stop, nil
}

func login(ctx context.Context, base, token string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS("#content")),
	)
}

// paintJS waits for the page's first-contentful-paint entry and returns its time (ms from
// the navigation's start), with the navigation's responseEnd and domContentLoaded.
const paintJS = `new Promise(resolve => {
  const nav = () => performance.getEntriesByType('navigation')[0] || {};
  const done = fcp => resolve({fcp: fcp, responseEnd: nav().responseEnd || 0, dcl: nav().domContentLoadedEventEnd || 0,
    rows: document.querySelectorAll('#objects tbody tr').length});
  const e = performance.getEntriesByName('first-contentful-paint')[0];
  if (e) { done(e.startTime); return; }
  new PerformanceObserver(l => { for (const x of l.getEntries()) if (x.name === 'first-contentful-paint') done(x.startTime); })
    .observe({type: 'paint', buffered: true});
})`

type paintResult struct {
	FCP         float64 `json:"fcp"`
	ResponseEnd float64 `json:"responseEnd"`
	DCL         float64 `json:"dcl"`
	Rows        int     `json:"rows"`
}

func paint(objects, clients, runs int, chromium string) error {
	e, err := start(true)
	if err != nil {
		return err
	}
	defer e.stop()
	ctx := context.Background()
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	t0 := time.Now()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(objects) {
					return
				}
				o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubeos.dev/v1alpha1", "kind": "Credential",
					"metadata": map[string]any{"name": fmt.Sprintf("cred-%05d", i), "namespace": "bench"},
					"spec":     map[string]any{"type": "password", "length": int64(16)}}}
				for attempt := 0; ; attempt++ {
					_, err := e.dyn.Resource(gvr("credentials")).Namespace("bench").Create(ctx, o, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) {
						break
					}
					if attempt == 5 {
						failed.Add(1)
						break
					}
					time.Sleep(time.Second)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d creates failed", n)
	}
	emit(map[string]any{"step": "create", "objects": objects, "seconds": time.Since(t0).Seconds()})
	token, err := e.token(ctx, "kube-system", "bench-admin", "cluster-admin", false)
	if err != nil {
		return err
	}
	bctx, stop, err := browser(chromium, 1400, 1000)
	if err != nil {
		return err
	}
	defer stop()
	tctx, cancel := context.WithTimeout(bctx, 10*time.Minute)
	defer cancel()
	if err := login(tctx, e.ts.URL, token); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	views := map[string]string{
		"paged (name order, API continue tokens)":   "/ui/kinds/credentials?ns=bench",
		"page 3 (continue token)":                   "",
		"filtered and sorted (phase=Pending, -age)": "/ui/kinds/credentials?ns=bench&phase=Pending&sort=-age",
		"sorted (-age), page 3":                     "/ui/kinds/credentials?ns=bench&sort=-age&page=2",
		"text filter (q=cred-0999)":                 "/ui/kinds/credentials?ns=bench&q=cred-0999",
		// The browser's own floor on this machine: a page with no data at all.
		"baseline: login page (no data)": "/ui/login",
	}
	// Page 3's URL comes from following "next" twice.
	var nextURL string
	for range 2 {
		if nextURL == "" {
			if err := chromedp.Do(tctx, chromedp.Navigate(e.ts.URL+views["paged (name order, API continue tokens)"])); err != nil {
				return err
			}
		} else if err := chromedp.Do(tctx, chromedp.Navigate(nextURL)); err != nil {
			return err
		}
		href, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById('next').href`))
		if err != nil {
			return fmt.Errorf("next link: %w", err)
		}
		nextURL = href
	}
	views["page 3 (continue token)"] = strings.TrimPrefix(nextURL, e.ts.URL)
	names := make([]string, 0, len(views))
	for k := range views {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		var fcps, wall []float64
		var last paintResult
		cpu0 := selfCPU()
		for range runs {
			start := time.Now()
			if err := chromedp.Do(tctx, chromedp.Navigate(e.ts.URL+views[name])); err != nil {
				return err
			}
			w := time.Since(start)
			r, err := chromedp.Run(tctx, chromedp.Evaluate[paintResult](paintJS, chromedp.EvalAwaitPromise))
			if err != nil {
				return fmt.Errorf("%s: paint timing: %w", name, err)
			}
			fcps, wall, last = append(fcps, r.FCP), append(wall, float64(w.Milliseconds())), r
		}
		cpu := selfCPU() - cpu0
		sort.Float64s(fcps)
		sort.Float64s(wall)
		emit(map[string]any{"view": name, "url": views[name], "objects": objects, "rows": last.Rows, "runs": runs,
			"fcp_ms_median": fcps[len(fcps)/2], "fcp_ms_max": fcps[len(fcps)-1],
			"load_ms_median": wall[len(wall)/2], "load_ms_max": wall[len(wall)-1],
			"response_end_ms": last.ResponseEnd, "dom_content_loaded_ms": last.DCL,
			// The server (and the bench's chromedp driver) run in this process; Chromium's
			// own CPU is not counted.
			"server_cpu_ms_per_load": float64((cpu / time.Duration(runs)).Microseconds()) / 1000})
	}
	return nil
}

// selfCPU is this process's CPU time so far (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
