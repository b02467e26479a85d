package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// shape is one scheduler_perf workload: the nodes and the measured pods.
type shape struct {
	zones int
	pod   func(i int) *corev1.Pod
}

var shapes = map[string]shape{
	// SchedulingBasic: pod-default on node-default.
	"basic": {zones: 1, pod: func(i int) *corev1.Pod { return pausePod("bench", fmt.Sprintf("p-%d", i)) }},
	// TopologySpreading: every pod spread over the zones, maxSkew 1, DoNotSchedule.
	"spread": {zones: 10, pod: func(i int) *corev1.Pod {
		p := pausePod("bench", fmt.Sprintf("p-%d", i))
		p.Labels = map[string]string{"app": "spread"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		return p
	}},
	// SchedulingPodAntiAffinity: no two pods of the group on one node.
	"antiaffinity": {zones: 1, pod: func(i int) *corev1.Pod {
		p := pausePod("bench", fmt.Sprintf("p-%d", i))
		p.Labels = map[string]string{"color": "green"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "green"}}}}}}
		return p
	}},
}

type runResult struct {
	podsPerSec, wallSecs            float64
	serverCPU, peerCPU, cpuPerPodMs float64
}

func bench(dir string, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	name := fs.String("shape", "basic", "basic | spread | antiaffinity")
	nodes := fs.Int("nodes", 5000, "nodes")
	pods := fs.Int("pods", 10000, "measured pods")
	only := fs.String("only", "", "run only kube or peer")
	_ = fs.Parse(args)
	sh, ok := shapes[*name]
	if !ok {
		return fmt.Errorf("unknown shape %q", *name)
	}
	res := map[string]runResult{}
	for i, who := range []string{"peer", "kube"} {
		if *only != "" && *only != who {
			continue
		}
		r, err := benchOne(filepath.Join(dir, who), 16443+i, who, sh, *nodes, *pods)
		if err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		res[who] = r
		fmt.Printf("%s: %d pods on %d nodes (%s): %.0f pods/s (%.1f s first to last bind); server CPU %.1f s, scheduler process CPU %.1f s\n",
			who, *pods, *nodes, *name, r.podsPerSec, r.wallSecs, r.serverCPU, r.peerCPU)
	}
	k, p := res["kube"], res["peer"]
	if k.podsPerSec > 0 && p.podsPerSec > 0 {
		kubeSched := k.serverCPU - p.serverCPU // Kube's scheduler: what its server spent beyond the peer run's server
		fmt.Printf("throughput ratio kube/kube-scheduler: %.2f×\n", k.podsPerSec/p.podsPerSec)
		fmt.Printf("scheduler CPU per pod: kube %.2f ms (server %.1f s − %.1f s), kube-scheduler %.2f ms; ratio %.2f×\n",
			1000*kubeSched/float64(*pods), k.serverCPU, p.serverCPU, 1000*p.peerCPU/float64(*pods), kubeSched/p.peerCPU)
		fmt.Printf("whole control plane CPU per pod: kube %.2f ms, kube server + kube-scheduler %.2f ms\n",
			1000*k.serverCPU/float64(*pods), 1000*(p.serverCPU+p.peerCPU)/float64(*pods))
	}
	return nil
}

func benchOne(dir string, port int, who string, sh shape, nodes, pods int) (runResult, error) {
	var r runResult
	s, err := startServer(dir, port, false)
	if err != nil {
		return r, err
	}
	ctx := context.Background()
	if _, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		s.proc.stop()
		return r, err
	}
	t := time.Now()
	err = parallel(nodes, 32, func(i int) error {
		return createNode(ctx, s.cs, node(fmt.Sprintf("node-%d", i), fmt.Sprintf("zone-%d", i%sh.zones), "4", "32Gi", nil, nil))
	})
	if err == nil {
		fmt.Printf("%s: %d nodes in %.1f s\n", who, nodes, time.Since(t).Seconds())
		t = time.Now()
		err = parallel(pods, 32, func(i int) error {
			_, err := s.cs.CoreV1().Pods("bench").Create(ctx, sh.pod(i), metav1.CreateOptions{})
			return err
		})
		fmt.Printf("%s: %d pods in %.1f s\n", who, pods, time.Since(t).Seconds())
	}
	s.proc.stop()
	if err != nil {
		return r, err
	}
	// Both runs restart the server, so both count its start (caches refilled) alike.
	s, err = startServer(dir, port, who == "kube")
	if err != nil {
		return r, err
	}
	defer s.proc.stop()
	var peer *proc
	if who == "peer" {
		if peer, err = startPeer(s); err != nil {
			return r, err
		}
		defer peer.stop()
	}
	first, last, err := waitBound(ctx, s.cs, pods, 30*time.Minute)
	if err != nil {
		return r, err
	}
	r.wallSecs = last.Sub(first).Seconds()
	if r.wallSecs > 0 {
		r.podsPerSec = float64(pods-1) / r.wallSecs
	}
	r.serverCPU = s.proc.cpu()
	if peer != nil {
		r.peerCPU = peer.cpu()
	}
	return r, nil
}

// waitBound watches the pods until n are bound, returning the times of the first and last
// binding seen.
func waitBound(ctx context.Context, cs kubernetes.Interface, n int, timeout time.Duration) (first, last time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bound := map[string]bool{}
	list, err := cs.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
	if err != nil {
		return first, last, err
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound[p.Name] = true
		}
	}
	if len(bound) > 0 {
		first = time.Now()
	}
	rv := list.ResourceVersion
	for len(bound) < n {
		w, err := cs.CoreV1().Pods("bench").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			return first, last, err
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if (ev.Type == watch.Added || ev.Type == watch.Modified) && p.Spec.NodeName != "" && !bound[p.Name] {
				bound[p.Name] = true
				now := time.Now()
				if first.IsZero() {
					first = now
				}
				last = now
				if len(bound) == n {
					break
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return first, last, errors.New("timed out: " + fmt.Sprint(len(bound)) + " of " + fmt.Sprint(n) + " pods bound")
		}
	}
	return first, last, nil
}
