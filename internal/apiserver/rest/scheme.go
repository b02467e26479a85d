package rest

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// scheme knows every built-in Go type, for protobuf request bodies.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

var schemaGR0 = schema.GroupResource{}

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }
