package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kubeversion "k8s.io/apimachinery/pkg/version"
)

// deprecationWarning is the warning every request to version v of a CRD gets (the Kind's
// DeprecationWarning): "" unless v is deprecated; else v's deprecationWarning, or
// kube-apiserver's default text, which points to the newest served version that is not
// deprecated and is newer than v (in Kubernetes version order: v2 > v1 > v1beta1 >
// v1alpha1), if there is one.
func deprecationWarning(spec *apiextensionsv1.CustomResourceDefinitionSpec, v *apiextensionsv1.CustomResourceDefinitionVersion) string {
	if !v.Deprecated {
		return ""
	}
	if v.DeprecationWarning != nil {
		return *v.DeprecationWarning
	}
	msg := fmt.Sprintf("%s/%s %s is deprecated", spec.Group, v.Name, spec.Names.Kind)
	var newest string
	for _, o := range spec.Versions {
		if !o.Served || o.Deprecated || kubeversion.CompareKubeAwareVersionStrings(v.Name, o.Name) >= 0 {
			continue
		}
		if newest == "" || kubeversion.CompareKubeAwareVersionStrings(newest, o.Name) < 0 {
			newest = o.Name
		}
	}
	if newest == "" {
		return msg
	}
	return msg + fmt.Sprintf("; use %s/%s %s", spec.Group, newest, spec.Names.Kind)
}
