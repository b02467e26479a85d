// Command crdmem measures what an idle CRD costs a Kube server: it starts `kube server` on
// a fresh data directory, creates -n distinct CRDs (each in its own group, with a schema,
// a CEL rule, status and scale subresources and printer columns) with -clients clients,
// waits until every one is Established, and reports the time that took and the growth of
// the server's RSS and Go heap (after a forced GC) divided by -n.
//
//	go build -o /tmp/kube ./cmd/kube && go run ./bench/crdmem -kube /tmp/kube -n 1000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"kubeos.dev/kube/bench/crdload"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kube := flag.String("kube", "", "path to the kube binary")
	n := flag.Int("n", 1000, "CRDs to create")
	clients := flag.Int("clients", 8, "concurrent clients")
	heapProfile := flag.String("heapprofile", "", "write the server's heap profile here after the measurement")
	flag.Parse()
	if *kube == "" {
		fmt.Fprintln(os.Stderr, "-kube is required")
		os.Exit(2)
	}
	if err := run(*kube, *n, *clients, *heapProfile); err != nil {
		fmt.Fprintln(os.Stderr, "crdmem:", err)
		os.Exit(1)
	}
}

func run(kube string, n, clients int, heapProfile string) error {
	dir, err := os.MkdirTemp("", "crdmem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(kube, "server", "--data-dir", dir, "--secure-port", "0", "--log-level", "error")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	ready := regexp.MustCompile(`Kube is ready at (https://\S+)`)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if ready.MatchString(sc.Text()) {
			break
		}
	}
	go io.Copy(io.Discard, out)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst, cfg.ContentType = -1, 0, "application/json"
	ext, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pid := cmd.Process.Pid
	rss0, heap0, err := measure(cfg, pid)
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := crdload.Parallel(n, clients, func(i int) error {
		crd, err := crdload.DatabaseCRD(i, "mem")
		if err != nil {
			return err
		}
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	created := time.Since(start)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		list, err := ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		est := 0
		for _, crd := range list.Items {
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					est++
				}
			}
		}
		if est >= n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d CRDs Established after 10 minutes", est, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	established := time.Since(start)
	rss1, heap1, err := measure(cfg, pid)
	if err != nil {
		return err
	}
	fmt.Printf("CRDs: %d, clients: %d\n", n, clients)
	fmt.Printf("all created after %s, all Established after %s (%s after the last create)\n",
		created.Round(time.Millisecond), established.Round(time.Millisecond), (established - created).Round(time.Millisecond))
	fmt.Printf("RSS: %.1f MB -> %.1f MB: %.1f KB per CRD\n", mb(rss0), mb(rss1), float64(rss1-rss0)/1024/float64(n))
	fmt.Printf("Go heap in use after GC: %.1f MB -> %.1f MB: %.1f KB per CRD\n", mb(heap0), mb(heap1), float64(heap1-heap0)/1024/float64(n))
	fmt.Printf("RSS after: %s\n", rssParts(pid))
	if heapProfile != "" {
		return saveHeapProfile(cfg, heapProfile)
	}
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// measure forces a GC in the server (GET /debug/pprof/heap?gc=1), then reads its RSS from
// /proc and its heap in use from /metrics.
func measure(cfg *rest.Config, pid int) (rss, heap int64, err error) {
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return 0, 0, err
	}
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	for _, p := range []string{"/debug/pprof/heap?gc=1", "/debug/pprof/heap?gc=1"} {
		resp, err := hc.Get(cfg.Host + p)
		if err != nil {
			return 0, 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := hc.Get(cfg.Host + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			heap = int64(f)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb * 1024
		}
	}
	return rss, heap, nil
}

// rssParts reads the anonymous, file-backed and shared parts of the server's RSS.
func rssParts(pid int) string {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, line := range strings.Split(string(status), "\n") {
		for _, k := range []string{"RssAnon:", "RssFile:", "RssShmem:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				parts = append(parts, k+" "+strings.Join(strings.Fields(v), " "))
			}
		}
	}
	return strings.Join(parts, ", ")
}

func saveHeapProfile(cfg *rest.Config, path string) error {
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Get(cfg.Host + "/debug/pprof/heap")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
