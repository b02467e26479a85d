package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/munnerz/goautoneg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"kubeos.dev/kube/internal/registry"
)

// output is the shape of a response body.
type output int

const (
	outObject          output = iota // the object or list itself
	outTable                         // meta.k8s.io Table
	outPartial                       // PartialObjectMetadata(List)
	outProtobuf                      // the object or list in protobuf (built-in kinds)
	outPartialProtobuf               // PartialObjectMetadata(List) in protobuf (any kind)
)

// negotiate picks the response shape from the Accept header. Objects of built-in kinds
// (protobufOK) are answered in protobuf when the client prefers it; everything else is JSON,
// which every client also accepts (clients decode by Content-Type).
func negotiateFor(accept string, protobufOK bool) (output, error) {
	if accept == "" {
		return outObject, nil
	}
	for _, a := range goautoneg.ParseAccept(accept) {
		if a.Type == "application" && a.SubType == "vnd.kubernetes.protobuf" && protobufOK &&
			(len(a.Params) == 0 || len(a.Params) == 1 && a.Params["stream"] == "watch") {
			return outProtobuf, nil
		}
		if a.Type == "application" && a.SubType == "vnd.kubernetes.protobuf" && a.Params["g"] == "meta.k8s.io" && a.Params["v"] == "v1" &&
			(a.Params["as"] == "PartialObjectMetadata" || a.Params["as"] == "PartialObjectMetadataList") {
			// Metadata is the same Go type for every kind: custom resources too.
			return outPartialProtobuf, nil
		}
		jsonish := (a.Type == "application" && (a.SubType == "json" || a.SubType == "*")) || (a.Type == "*" && a.SubType == "*")
		if !jsonish {
			continue
		}
		as := a.Params["as"]
		if as == "" {
			return outObject, nil
		}
		if a.Params["g"] != "meta.k8s.io" || (a.Params["v"] != "v1" && a.Params["v"] != "v1beta1") {
			continue
		}
		switch as {
		case "Table":
			return outTable, nil
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			return outPartial, nil
		}
	}
	return 0, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schemaGR0, "",
		"only the following media types are accepted: application/json, application/json;as=Table;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 0, false)
}

// acceptsObject checks that a client of a kind kube-apiserver serves without a Table
// convertor (computed kinds such as SelfSubjectAccessReview, create-only subresources)
// accepts the object itself: asking only for a Table or PartialObjectMetadata is 406
// NotAcceptable, with kube-apiserver's message.
func acceptsObject(accept string) error {
	if accept == "" {
		return nil
	}
	for _, a := range goautoneg.ParseAccept(accept) {
		if a.Params["as"] != "" {
			continue
		}
		switch {
		case a.Type == "*" && a.SubType == "*",
			a.Type == "application" && (a.SubType == "*" || a.SubType == "json" || a.SubType == "yaml" || a.SubType == "vnd.kubernetes.protobuf"):
			return nil
		}
	}
	return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schemaGR0, "",
		"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf", 0, false)
}

// negotiate picks the response shape for this call's kind.
func (c *call) negotiate() (output, error) {
	return negotiateFor(c.r.Header.Get("Accept"), c.kind.NewTyped != nil)
}

// MaxBodyBytes is the largest request body Kube reads (as kube-apiserver: 3 MiB).
const MaxBodyBytes = 3 * 1024 * 1024

// readBody reads the whole body, refusing more than MaxBodyBytes with 413.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
		}
		return nil, apierrors.NewBadRequest("reading the request body: " + err.Error())
	}
	if len(data) > MaxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
	}
	return data, nil
}

// isProtobuf reports whether a request body is Kubernetes protobuf.
func isProtobuf(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/vnd.kubernetes.protobuf"
}

var protoSerializer = protobuf.NewSerializer(scheme, scheme)

// bodyJSON turns a request body of any accepted media type into JSON. typed is the Go
// object protobuf bodies decode into; nil refuses protobuf (custom resources).
func bodyJSON(contentType string, data []byte, typed bool) ([]byte, error) {
	mt := "application/json"
	if contentType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(contentType); err != nil {
			return nil, unsupportedMediaType(contentType)
		}
	}
	switch mt {
	case "application/json", "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json":
		return data, nil
	case "application/yaml", "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			return nil, apierrors.NewBadRequest("the body is not valid YAML: " + err.Error())
		}
		return j, nil
	case "application/vnd.kubernetes.protobuf":
		if !typed {
			return nil, unsupportedMediaType(contentType)
		}
		obj, _, err := protoSerializer.Decode(data, nil, nil)
		if err != nil {
			return nil, apierrors.NewBadRequest("the body is not a valid protobuf object: " + err.Error())
		}
		return json.Marshal(obj)
	}
	return nil, unsupportedMediaType(contentType)
}

// decodeBody decodes an object body of any accepted media type. A protobuf body (typed: a
// built-in kind) is converted from its Go object straight into the unstructured form, without
// the JSON text round trip of bodyJSON; any other body is turned into JSON, which is also
// returned (data is nil for protobuf: such a body cannot carry unknown or duplicate fields).
func decodeBody(contentType string, body []byte, typed bool) (obj *unstructured.Unstructured, data []byte, err error) {
	if typed && isProtobuf(contentType) {
		typedObj, _, err := protoSerializer.Decode(body, nil, nil)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest("the body is not a valid protobuf object: " + err.Error())
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typedObj)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest("the body is not a valid protobuf object: " + err.Error())
		}
		return &unstructured.Unstructured{Object: m}, nil, nil
	}
	if data, err = bodyJSON(contentType, body, typed); err != nil {
		return nil, nil, err
	}
	obj, err = decodeObject(data)
	return obj, data, err
}

// decodeObject parses a JSON body into an object.
func decodeObject(data []byte) (*unstructured.Unstructured, error) {
	var v any
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return nil, apierrors.NewBadRequest("the body is not valid JSON: " + err.Error())
	}
	return objectOf(v)
}

// decodeObjectDuplicates is decodeObject that also lists the duplicate fields of the body
// (`duplicate field "spec.a"`), in the same pass; the last of duplicates wins, as in
// decodeObject.
func decodeObjectDuplicates(data []byte) (*unstructured.Unstructured, []error, error) {
	var v any
	dups, err := kjson.UnmarshalStrict(data, &v, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("the body is not valid JSON: " + err.Error())
	}
	obj, err := objectOf(v)
	return obj, dups, err
}

// objectOf checks that a decoded body is an object with an object (or no) metadata.
func objectOf(v any) (*unstructured.Unstructured, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, apierrors.NewBadRequest("the body must be a JSON object")
	}
	if md, ok := m["metadata"]; ok && md != nil {
		if _, ok := md.(map[string]any); !ok {
			return nil, apierrors.NewBadRequest("metadata must be an object")
		}
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// strictErrors lists the unknown and duplicate fields of a body: built-in kinds against
// their Go types, others through their strategy when it can tell (registry.FieldChecker).
func strictErrors(kind *registry.Kind, data []byte) []error {
	if fc, ok := kind.StrategyOrDefault().(registry.FieldChecker); ok {
		return fc.UnknownFields(data)
	}
	if kind.NewTyped == nil {
		return nil
	}
	obj := kind.NewTyped()
	errs, err := kjson.UnmarshalStrict(data, obj)
	if err != nil {
		return []error{err}
	}
	return errs
}

var _ runtime.Object = (*unstructured.Unstructured)(nil)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// writeJSON writes v as a JSON response with an explicit Content-Type (without one, Go
// sniffs text/plain and every client fails).
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := appendJSON(make([]byte, 0, 1024), v)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "encoding the response: " + err.Error(), "reason": "InternalError", "code": 500})
		code = http.StatusInternalServerError
	}
	writeRaw(w, code, data)
}

func writeRaw(w http.ResponseWriter, code int, data []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(code)
	w.Write(data)
	w.Write([]byte{'\n'})
}
