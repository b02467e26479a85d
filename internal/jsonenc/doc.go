// Package jsonenc appends JSON without reflection for the values on Kube's hot paths:
// unstructured objects (maps, slices, strings, numbers, booleans, nil), in exactly the form
// encoding/json writes them (keys sorted, no HTML escaping). Object encoding is the hot path
// of every list and watch, and audit events are written twice per request.
package jsonenc
