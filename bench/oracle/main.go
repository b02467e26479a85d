package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

func main() {
	os.Exit(run())
}

func run() int {
	peerBin := flag.String("peer-bin", "/work/peers-bin", "directory of upstream v1.37.2 binaries: kube-apiserver, kube-controller-manager, etcd (and kube-scheduler)")
	kubeBin := flag.String("kube", "", "the kube binary under test (go build -o … ./cmd/kube)")
	schedBin := flag.String("scheduler", "", "kube-scheduler binary (default: <peer-bin>/kube-scheduler)")
	script := flag.String("peer-script", "/work/shared/peers/run-kube-apiserver.sh", "the script that starts the peer's etcd and kube-apiserver")
	dir := flag.String("dir", "", "working directory (default: a new one under $TMPDIR, removed at the end unless -keep)")
	keep := flag.Bool("keep", false, "keep the working directory (logs, data)")
	only := flag.String("scenarios", "", "comma-separated scenarios to run (default: all); -list prints them")
	list := flag.Bool("list", false, "list the scenarios and exit")
	timeout := flag.Duration("timeout", 40*time.Minute, "give up after this long")
	verbose := flag.Bool("v", false, "print each side's paths, events and calls")
	self := flag.Bool("self", false, "compare the peer with a second peer instead of Kube (the oracle's own check: what differs there is upstream's nondeterminism or the oracle's; \"kube\" in the output is the second peer)")
	kcmArgs := flag.String("kcm-args", "", "more kube-controller-manager flags, space-separated (e.g. --v=4)")
	flag.Parse()
	kcmExtraArgs = strings.Fields(*kcmArgs)
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	peerBinDir = *peerBin
	scs := scenarios()
	if *list {
		for _, sc := range scs {
			fmt.Println(sc.name)
		}
		return 0
	}
	if *kubeBin == "" {
		fmt.Fprintln(os.Stderr, "oracle: -kube is required")
		return 2
	}
	if *only != "" {
		want := map[string]bool{}
		for _, n := range strings.Split(*only, ",") {
			want[strings.TrimSpace(n)] = true
		}
		var sel []*scenario
		for _, sc := range scs {
			if want[sc.name] {
				sel = append(sel, sc)
				delete(want, sc.name)
			}
		}
		if len(want) > 0 {
			fmt.Fprintf(os.Stderr, "oracle: unknown scenarios %v (-list)\n", keys(want))
			return 2
		}
		scs = sel
	}
	if *schedBin == "" {
		*schedBin = filepath.Join(*peerBin, "kube-scheduler")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "oracle-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			return 2
		}
		*dir = d
	}
	if !*keep {
		defer os.RemoveAll(*dir)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()

	var kube, peer *side
	var kerr, perr error
	var wg sync.WaitGroup
	wg.Add(2)
	t0 := time.Now()
	go func() {
		defer wg.Done()
		d := filepath.Join(*dir, "kube")
		_ = os.MkdirAll(d, 0o755)
		if *self {
			kube, kerr = startPeer(ctx, *peerBin, *script, *kubeBin, *schedBin, d)
			return
		}
		kube, kerr = startKube(ctx, *kubeBin, d)
	}()
	go func() {
		defer wg.Done()
		d := filepath.Join(*dir, "peer")
		_ = os.MkdirAll(d, 0o755)
		peer, perr = startPeer(ctx, *peerBin, *script, *kubeBin, *schedBin, d)
	}()
	wg.Wait()
	defer func() {
		if kube != nil {
			kube.close()
		}
		if peer != nil {
			peer.close()
		}
	}()
	if kerr != nil || perr != nil {
		fmt.Fprintf(os.Stderr, "oracle: start: kube: %v; peer: %v (logs in %s)\n", kerr, perr, *dir)
		return 2
	}
	fmt.Printf("both sides up in %s (kube %s; peer %s; work dir %s)\n", time.Since(t0).Round(time.Second), *kubeBin, *peerBin, *dir)

	failed := 0
	gaps := map[string]bool{}
	var summary []string
	for _, sc := range scs {
		var kr, pr result
		wg.Add(2)
		go func() { defer wg.Done(); kr = runScenario(ctx, kube, sc) }()
		go func() { defer wg.Done(); pr = runScenario(ctx, peer, sc) }()
		wg.Wait()
		fmt.Printf("\n=== %s (kube %s, peer %s)\n", sc.name, kr.took.Round(time.Second), pr.took.Round(time.Second))
		bad, nAllowed := 0, 0
		if kr.err != nil {
			fmt.Printf("  ERROR kube: %v\n", kr.err)
			bad++
		}
		if pr.err != nil {
			fmt.Printf("  ERROR peer: %v\n", pr.err)
			bad++
		}
		kv, pv := newView(sc, kr), newView(sc, pr)
		if *verbose {
			kv.dump(os.Stdout, "kube")
			pv.dump(os.Stdout, "peer")
		}
		for _, d := range compare(kv, pv) {
			if a := allowed(sc.name, d); a != nil {
				nAllowed++
				what := "allowed"
				if a.gap {
					what = "known gap"
					gaps[a.why] = true
				}
				fmt.Printf("  %s [%s] %s\n      (%s)\n", what, d.section, d.text, a.why)
				continue
			}
			bad++
			fmt.Printf("  DIFF [%s] %s\n", d.section, d.text)
		}
		verdict := "same"
		switch {
		case bad > 0:
			verdict = fmt.Sprintf("DIFFERENT (%d differences)", bad)
			failed++
		case nAllowed > 0:
			verdict = fmt.Sprintf("same but %d allowed differences", nAllowed)
		}
		fmt.Printf("  → %s\n", verdict)
		summary = append(summary, fmt.Sprintf("%-16s %s", sc.name, verdict))
	}
	fmt.Printf("\nsummary (%s):\n  %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(summary, "\n  "))
	for g := range gaps {
		fmt.Printf("known gap outside the controllers: %s\n", g)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
