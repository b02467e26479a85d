package main

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(kind, name, generateName string, owner ...string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"kind": kind, "metadata": map[string]any{"name": name}}}
	if generateName != "" {
		o.SetGenerateName(generateName)
	}
	if len(owner) == 2 {
		t := true
		_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"kind": owner[0], "name": owner[1], "controller": t}}, "metadata", "ownerReferences")
	}
	return o
}

func TestNames(t *testing.T) {
	n := newNames([]*unstructured.Unstructured{
		obj("Pod", "web-6cf7c6c877-x8k2p", "web-6cf7c6c877-"),
		obj("Pod", "web-0", "web-"), // a StatefulSet's pod: its name is not random
		obj("Job", "tick-29412345", "", "CronJob", "tick"),
		obj("Job", "tick-29412346", "", "CronJob", "tick"),
		obj("Pod", "tick-29412346-bq7zt", "tick-29412346-"),
	})
	for in, want := range map[string]string{
		"web-6cf7c6c877-x8k2p":              "web-6cf7c6c877-*",
		"web-0":                             "web-0",
		"tick-29412346":                     "tick-#2",
		"Created pod: tick-29412346-bq7zt":  "Created pod: tick-#2-*",
		"Saw completed job: tick-29412345,": "Saw completed job: tick-#1,",
	} {
		if got := n.r.Replace(in); got != want {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
}

func TestPaths(t *testing.T) {
	for _, c := range []struct {
		name     string
		in, want []string
		f        func([]string) []string
	}{
		{"batches sorted", []string{"+b", "+a", "-d", "-c", "+e"}, []string{"+a", "+b", "-c", "-d", "+e"}, batches},
		{"emptied finalizers dropped before gone", []string{"x", "deleting finalizers=[] owners=[]", "gone"}, []string{"x", "gone"}, withoutEmptied},
		{"emptied finalizers kept when not last", []string{"deleting finalizers=[] owners=[]", "y"}, []string{"deleting finalizers=[] owners=[]", "y"}, withoutEmptied},
	} {
		if got := c.f(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValue(t *testing.T) {
	n := &normalizer{names: newNames(nil)}
	for in, want := range map[string]string{
		"2026-12-06T14:46:16Z":               "<time>",
		"10.244.1.7":                         "<ip>",
		"Successfully assigned a/b to sim-2": "Successfully assigned a/b to <node>",
		"kube-api-access-7xk2q":              "kube-api-access-*",
	} {
		if got := n.value(in); got != want {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
	if lastKey("metadata.labels.topology.kubernetes.io/zone") != "topology.kubernetes.io/zone" || lastKey("endpoints[0].zone") != "zone" || lastKey("endpoints") != "endpoints" {
		t.Error("lastKey")
	}
}
