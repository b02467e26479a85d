package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// diff is one difference between the sides: where (section: a checkpoint, "path", "events",
// "calls") and what.
type diff struct {
	section string
	text    string
}

// view is one side's scenario, normalised.
type view struct {
	n     *normalizer
	res   result
	paths map[string][]string // "pods" and "<Kind> <name> <what>" → the sequence a client saw
	evs   []string
}

func newView(sc *scenario, res result) *view {
	var objs []*unstructured.Unstructured
	for _, r := range res.recs {
		objs = append(objs, r.obj)
	}
	for _, cp := range res.cps {
		objs = append(objs, cp.objs...)
	}
	v := &view{n: &normalizer{names: newNames(objs), keepNodes: sc.keepNodes}, res: res, paths: map[string][]string{}}
	v.build()
	return v
}

// build derives the paths and events from the watch streams.
func (v *view) build() {
	deleting := map[string]bool{}
	seenEv := map[string]bool{}
	appendDedup := func(k, s string) {
		p := v.paths[k]
		if len(p) == 0 || p[len(p)-1] != s {
			v.paths[k] = append(p, s)
		}
	}
	for _, r := range v.res.recs {
		o := r.obj
		name := v.n.value(o.GetName())
		switch r.kind {
		case "Event":
			if r.typ == watch.Deleted {
				continue
			}
			l := v.n.event(o)
			if !seenEv[l] {
				seenEv[l] = true
				v.evs = append(v.evs, l)
			}
			continue
		case "Pod":
			uid := string(o.GetUID())
			if h := o.GetLabels()["controller-revision-hash"]; h != "" {
				name += "@" + v.n.value(h) // a DaemonSet's or StatefulSet's revision
			}
			// The whole order, and each owner's own (by generateName): when one sync scales
			// two ReplicaSets, how their pods interleave is timing, each one's order is not.
			group := "pods of " + strings.TrimSuffix(v.n.value(o.GetGenerateName()), "-")
			switch {
			case r.typ == watch.Added && !deleting[uid+"+"]:
				deleting[uid+"+"] = true
				v.paths["pods"] = append(v.paths["pods"], "+"+name)
				v.paths[group] = append(v.paths[group], "+"+name)
			case (o.GetDeletionTimestamp() != nil || r.typ == watch.Deleted) && !deleting[uid]:
				deleting[uid] = true
				v.paths["pods"] = append(v.paths["pods"], "-"+name)
				v.paths[group] = append(v.paths[group], "-"+name)
			}
			continue
		}
		if strings.HasSuffix(name, "*") {
			continue // interchangeable objects have no path of their own
		}
		key := r.kind + " " + name
		if rep, ok, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); ok && r.typ != watch.Deleted {
			appendDedup(key+" spec.replicas", fmt.Sprint(rep))
		}
		// Each condition type's own sequence: how one type's changes interleave with
		// another's depends on which intermediate states a status write happened to see.
		if conds, ok, _ := unstructured.NestedSlice(o.Object, "status", "conditions"); ok {
			for _, c := range conds {
				m, _ := c.(map[string]any)
				appendDedup(fmt.Sprintf("%s condition %v", key, m["type"]), fmt.Sprintf("%v/%v", m["status"], m["reason"]))
			}
		}
		if r.typ != watch.Deleted {
			fin := o.GetFinalizers()
			del := ""
			if o.GetDeletionTimestamp() != nil {
				del = "deleting "
			}
			var refs []string
			for _, ref := range o.GetOwnerReferences() {
				refs = append(refs, ref.Kind+"/"+v.n.value(ref.Name))
			}
			appendDedup(key+" metadata", fmt.Sprintf("%sfinalizers=%v owners=%v", del, fin, refs))
		} else {
			appendDedup(key+" metadata", "gone")
		}
		if r.kind == "Node" {
			taints, _, _ := unstructured.NestedSlice(o.Object, "spec", "taints")
			var ts []string
			for _, t := range taints {
				m, _ := t.(map[string]any)
				ts = append(ts, fmt.Sprintf("%v:%v", m["key"], m["effect"]))
			}
			sort.Strings(ts)
			appendDedup(key+" taints", "["+strings.Join(ts, ",")+"]")
		}
	}
	sort.Strings(v.evs)
	for k, p := range v.paths {
		if k == "pods" || strings.HasPrefix(k, "pods of ") {
			v.paths[k] = batches(p)
		}
	}
	// A Deployment's Progressing=True/ReplicaSetUpdated lies between NewReplicaSetCreated
	// and NewReplicaSetAvailable; a status write that sees the new ReplicaSet already
	// available skips it (seen peer against peer, -self): the milestones are compared.
	for k, p := range v.paths {
		if strings.HasPrefix(k, "Deployment ") && strings.HasSuffix(k, " condition Progressing") {
			v.paths[k] = dedup(slices.DeleteFunc(slices.Clone(p), func(s string) bool { return s == "True/ReplicaSetUpdated" }))
		}
	}
}

func dedup(p []string) []string {
	return slices.Compact(p)
}

// batches sorts each run of consecutive creations (or deletions) in a pod path: upstream's
// controllers create and delete a batch of pods from parallel goroutines (slowStartBatch,
// a ReplicaSet's deletions), so the order within a run is upstream's own nondeterminism;
// the runs and their contents are not.
func batches(p []string) []string {
	out := slices.Clone(p)
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j][0] == out[i][0] {
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return out
}

// dump prints what the view compares besides the checkpoints.
func (v *view) dump(w io.Writer, who string) {
	var ks []string
	for k := range v.paths {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(w, "  %s path %s: %s\n", who, k, strings.Join(v.paths[k], " → "))
	}
	for _, e := range v.evs {
		fmt.Fprintf(w, "  %s event %s\n", who, e)
	}
	for _, c := range v.res.calls {
		fmt.Fprintf(w, "  %s call %s\n", who, v.n.value(c))
	}
}

// compare lists the differences between the sides' views of one scenario.
func compare(kube, peer *view) []diff {
	var ds []diff
	add := func(section, format string, a ...any) { ds = append(ds, diff{section, fmt.Sprintf(format, a...)}) }
	if len(kube.res.cps) != len(peer.res.cps) {
		add("checkpoints", "kube reached %d checkpoints, peer %d", len(kube.res.cps), len(peer.res.cps))
	}
	for i := 0; i < min(len(kube.res.cps), len(peer.res.cps)); i++ {
		ds = append(ds, compareCheckpoint(kube, peer, i)...)
	}
	// Paths.
	keys := map[string]bool{}
	for k := range kube.paths {
		keys[k] = true
	}
	for k := range peer.paths {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		a, b := kube.paths[k], peer.paths[k]
		if strings.HasSuffix(k, " metadata") && !slices.Equal(a, b) && slices.Equal(withoutEmptied(a), withoutEmptied(b)) {
			add("path", "%s: kube shows the object with its last finalizer removed before it is gone; kube-apiserver deletes it in the update that removes the last finalizer (one DELETED event, no MODIFIED)", k)
			continue
		}
		if !slices.Equal(a, b) {
			add("path", "%s\n      kube: %s\n      peer: %s", k, strings.Join(a, " → "), strings.Join(b, " → "))
		}
	}
	// Events (reasons and messages; how often each was emitted is timing).
	for _, l := range setDiff(kube.evs, peer.evs) {
		add("events", "only kube: %s", l)
	}
	for _, l := range setDiff(peer.evs, kube.evs) {
		add("events", "only peer: %s", l)
	}
	// Answers to the scenario's requests.
	for i := 0; i < max(len(kube.res.calls), len(peer.res.calls)); i++ {
		var a, b string
		if i < len(kube.res.calls) {
			a = kube.n.value(kube.res.calls[i])
		}
		if i < len(peer.res.calls) {
			b = peer.n.value(peer.res.calls[i])
		}
		if a != b {
			add("calls", "\n      kube: %s\n      peer: %s", a, b)
		}
	}
	return ds
}

func compareCheckpoint(kube, peer *view, i int) []diff {
	section := "checkpoint " + kube.res.cps[i].name
	group := func(v *view) map[string][][]string {
		g := map[string][][]string{}
		for _, o := range v.res.cps[i].objs {
			k := v.n.key(o)
			g[k] = append(g[k], v.n.lines(o))
		}
		for _, l := range g {
			slices.SortFunc(l, func(a, b []string) int { return strings.Compare(strings.Join(a, "\n"), strings.Join(b, "\n")) })
		}
		return g
	}
	a, b := group(kube), group(peer)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var ds []diff
	for _, k := range sorted {
		la, lb := a[k], b[k]
		if len(la) != len(lb) {
			ds = append(ds, diff{section, fmt.Sprintf("%s: kube has %d, peer %d", k, len(la), len(lb))})
			continue
		}
		for j := range la {
			ma, mb := pathMap(la[j]), pathMap(lb[j])
			var paths []string
			for p := range ma {
				paths = append(paths, p)
			}
			for p := range mb {
				if _, ok := ma[p]; !ok {
					paths = append(paths, p)
				}
			}
			sort.Strings(paths)
			which := ""
			if len(la) > 1 {
				which = fmt.Sprintf(" (%d of %d)", j+1, len(la))
			}
			for _, p := range paths {
				va, oka := ma[p]
				vb, okb := mb[p]
				if oka && okb && va == vb {
					continue
				}
				if !oka {
					va = "<absent>"
				}
				if !okb {
					vb = "<absent>"
				}
				ds = append(ds, diff{section, fmt.Sprintf("%s%s %s: kube=%s peer=%s", k, which, p, va, vb)})
			}
		}
	}
	return ds
}

// withoutEmptied drops from a metadata path each "deleting, no finalizers left" state that
// is followed by "gone": a watcher of kube-apiserver never sees it (the update that removes
// an object's last finalizer deletes the object instead of writing it).
func withoutEmptied(p []string) []string {
	var out []string
	for i, s := range p {
		if strings.HasPrefix(s, "deleting finalizers=[] ") && i+1 < len(p) && p[i+1] == "gone" {
			continue
		}
		out = append(out, s)
	}
	return out
}

// pathMap splits "path=value" lines.
func pathMap(lines []string) map[string]string {
	m := make(map[string]string, len(lines))
	for _, l := range lines {
		p, v, _ := strings.Cut(l, "=")
		m[p] = v
	}
	return m
}

// setDiff is the lines of a not in b, in a's order.
func setDiff(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}
