package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// names maps the names a side generated at random to names that are the same on both sides:
// an object with metadata.generateName becomes <generateName>* (its siblings are
// interchangeable: they are compared as a multiset), a CronJob's Job (named by the minute it
// was scheduled for) becomes <cronjob>-#<n> in the order of those minutes.
type names struct {
	canon map[string]string
	r     *strings.Replacer
}

func newNames(objs []*unstructured.Unstructured) *names {
	n := &names{canon: map[string]string{}}
	var cronJobs []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "Job" && ownerKind(o) == "CronJob" && !seen[o.GetName()] {
			seen[o.GetName()] = true
			cronJobs = append(cronJobs, o)
		}
	}
	slices.SortFunc(cronJobs, func(a, b *unstructured.Unstructured) int { return cmp.Compare(a.GetName(), b.GetName()) })
	count := map[string]int{}
	for _, o := range cronJobs {
		owner := o.GetOwnerReferences()[0].Name
		count[owner]++
		n.canon[o.GetName()] = fmt.Sprintf("%s-#%d", owner, count[owner])
	}
	// A ReplicaSet made by `kubectl rollout restart` has a pod-template-hash of a template
	// that holds the time of the restart.
	for _, o := range objs {
		if o.GetKind() != "ReplicaSet" {
			continue
		}
		if _, ok, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "annotations", "kubectl.kubernetes.io/restartedAt"); !ok {
			continue
		}
		hash := o.GetLabels()["pod-template-hash"]
		if hash != "" && strings.HasSuffix(o.GetName(), "-"+hash) {
			n.canon[o.GetName()] = strings.TrimSuffix(o.GetName(), hash) + "<restarted>"
			n.canon[hash] = "<restarted>"
		}
	}
	n.build()
	gen := map[string]string{}
	for _, o := range objs {
		g := o.GetGenerateName()
		// Only a random suffix (apimachinery's utilrand: five of its alphabet) is one:
		// a StatefulSet's pods have generateName too, but their names are <set>-<ordinal>.
		if g != "" && strings.HasPrefix(o.GetName(), g) && reRandSuffix.MatchString(o.GetName()[len(g):]) {
			gen[o.GetName()] = n.r.Replace(g) + "*"
		}
	}
	for k, v := range gen {
		n.canon[k] = v
	}
	n.build()
	return n
}

func (n *names) build() {
	keys := make([]string, 0, len(n.canon))
	for k := range n.canon {
		keys = append(keys, k)
	}
	// Longest first, so that a Pod's name is replaced before its owner's prefix of it.
	sort.Slice(keys, func(i, j int) bool {
		return len(keys[i]) > len(keys[j]) || len(keys[i]) == len(keys[j]) && keys[i] < keys[j]
	})
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, k, n.canon[k])
	}
	n.r = strings.NewReplacer(pairs...)
}

func ownerKind(o *unstructured.Unstructured) string {
	for _, r := range o.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.Kind
		}
	}
	return ""
}

var (
	reTime   = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	reIP     = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(/\d{1,2})?\b`)
	reUID    = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reAPIVol = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)
	rePEM    = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]+-----.*-----END [A-Z ]+-----\n?`)
	reNode   = regexp.MustCompile(`\bsim-\d+\b`)
	// reRandSuffix is what apiserver's generateName appends (k8s.io/apimachinery/pkg/util/rand).
	reRandSuffix = regexp.MustCompile(`^[bcdfghjklmnpqrstvwxz2456789]{5}$`)
)

// normalizer turns one side's objects into comparable lines.
type normalizer struct {
	names     *names
	keepNodes bool // node names are part of the scenario (DaemonSet, node lifecycle)
}

// dropped are fields whose values are per-object or per-run by nature.
var dropped = map[string]bool{
	"metadata.uid": true, "metadata.resourceVersion": true, "metadata.creationTimestamp": true,
	"metadata.managedFields": true, "metadata.selfLink": true,
}

// value normalises one string value.
func (n *normalizer) value(s string) string {
	if reTime.MatchString(s) {
		return "<time>"
	}
	s = n.names.r.Replace(s)
	s = rePEM.ReplaceAllString(s, "<pem>")
	s = reUID.ReplaceAllString(s, "<uid>")
	s = reIP.ReplaceAllString(s, "<ip>")
	s = reAPIVol.ReplaceAllString(s, "kube-api-access-*")
	if !n.keepNodes {
		s = reNode.ReplaceAllString(s, "<node>")
	}
	return s
}

// key is the name an object is compared under.
func (n *normalizer) key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + n.value(o.GetName())
}

// lines flattens a normalised object into sorted "path=value" lines.
func (n *normalizer) lines(o *unstructured.Unstructured) []string {
	var out []string
	n.walk("", o.Object, &out)
	return out
}

func (n *normalizer) walk(path string, v any, out *[]string) {
	if dropped[path] {
		return
	}
	if !n.keepNodes && (lastKey(path) == "topology.kubernetes.io/zone" || lastKey(path) == "zone") {
		*out = append(*out, path+"=<zone>") // the zone of the node a scheduler chose
		return
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			switch k {
			case "containerID", "imageID", "uid", "resourceVersion":
				continue
			}
			n.walk(p, x[k], out)
		}
	case []any:
		items := x
		if k := lastKey(path); k == "endpoints" || k == "addresses" || k == "notReadyAddresses" {
			// Order of endpoints follows pods' interchangeable names: compare as a set.
			items = slices.Clone(x)
			slices.SortFunc(items, func(a, b any) int { return cmp.Compare(n.flat(a), n.flat(b)) })
		}
		for i, it := range items {
			n.walk(fmt.Sprintf("%s[%s]", path, n.listKey(it, i)), it, out)
		}
		if len(items) == 0 {
			*out = append(*out, path+"=[]")
		}
	case string:
		*out = append(*out, path+"="+n.value(x))
	default:
		b, _ := json.Marshal(x)
		*out = append(*out, path+"="+string(b))
	}
}

// lastKey is the last key of a path ("a.b[x].c" → "c"; a label key's dots included when
// the path ends in labels.<key>).
func lastKey(path string) string {
	if i := strings.LastIndex(path, "labels."); i >= 0 {
		return path[i+len("labels."):]
	}
	if i := strings.LastIndexAny(path, ".]"); i >= 0 {
		return path[i+1:]
	}
	return path
}

// listKey names a list item by its type or name where it has one (conditions, containers,
// ports, volumes), so that a missing item shows as one difference, not a shifted list.
func (n *normalizer) listKey(it any, i int) string {
	if m, ok := it.(map[string]any); ok {
		for _, k := range []string{"type", "name"} {
			if s, ok := m[k].(string); ok {
				return n.value(s)
			}
		}
	}
	return fmt.Sprint(i)
}

func (n *normalizer) flat(v any) string {
	var out []string
	n.walk("", v, &out)
	return strings.Join(out, "\n")
}

// event is one Event as a line: who, type, reason, which component, message.
func (n *normalizer) event(o *unstructured.Unstructured) string {
	io, _, _ := unstructured.NestedMap(o.Object, "involvedObject")
	comp, _, _ := unstructured.NestedString(o.Object, "source", "component")
	if comp == "" {
		comp, _, _ = unstructured.NestedString(o.Object, "reportingComponent")
	}
	typ, _, _ := unstructured.NestedString(o.Object, "type")
	reason, _, _ := unstructured.NestedString(o.Object, "reason")
	msg, _, _ := unstructured.NestedString(o.Object, "message")
	return fmt.Sprintf("%v/%s %s %s [%s]: %s", io["kind"], n.value(fmt.Sprint(io["name"])), typ, reason, comp, n.value(msg))
}
