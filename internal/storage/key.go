package storage

import "strings"

// Prefix is the root of every key the store writes.
const Prefix = "/registry/"

// ResourcePrefix is the key prefix of every object of one resource, ending in "/". The
// legacy core group ("") is spelled "core".
func ResourcePrefix(group, resource string) string {
	if group == "" {
		group = "core"
	}
	return Prefix + group + "/" + resource + "/"
}

// NamespacePrefix is the key prefix of the objects of a namespaced resource in one namespace.
func NamespacePrefix(group, resource, namespace string) string {
	return ResourcePrefix(group, resource) + namespace + "/"
}

// Key is the key of one object; namespace is empty for cluster-scoped resources.
func Key(group, resource, namespace, name string) string {
	if namespace == "" {
		return ResourcePrefix(group, resource) + name
	}
	return NamespacePrefix(group, resource, namespace) + name
}

// prefixEnd is the first key after every key that starts with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}

func hasPrefix(key, prefix string) bool { return strings.HasPrefix(key, prefix) }
