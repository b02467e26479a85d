package crd

import (
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectMetaFields are the JSON names of metav1.ObjectMeta's fields.
var objectMetaFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(metav1.ObjectMeta{})
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// pruneUnknownMetadata drops the fields of a custom resource's metadata that ObjectMeta does
// not have and returns their paths ("metadata.foo"). Upstream gets the same result by
// round-tripping metadata through ObjectMeta on every decode; looking at the keys is enough
// here because the handler type-checks the known fields on its own.
func pruneUnknownMetadata(obj map[string]any) []string {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return nil
	}
	var dropped []string
	for k := range md {
		if !objectMetaFields[k] {
			delete(md, k)
			dropped = append(dropped, "metadata."+k)
		}
	}
	sort.Strings(dropped)
	return dropped
}
