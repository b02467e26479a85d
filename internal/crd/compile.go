package crd

import (
	"context"
	"net/url"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

// Options configure compiled CRDs.
type Options struct {
	// ResolveService turns a conversion webhook's service reference into a URL. nil: CRDs
	// whose webhook names a service fail conversions with an error that says to use
	// clientConfig.url, as Kube runs no cluster network that could reach a Service.
	ResolveService func(namespace, name string, port int32) (*url.URL, error)
}

// Compile returns one Kind per served version of crd. crd must not be changed afterwards
// (the Kinds keep it and decode a version's schema on its first request). Terminating: the Kinds refuse create, as upstream does while a CRD's
// custom resources are being deleted.
func Compile(crd *Stripped, o Options, terminating bool) []*registry.Kind {
	c := &compiled{crd: crd, opts: o}
	storage := StorageVersion(crd.CustomResourceDefinition)
	names := crd.Spec.Names
	listKind := names.ListKind
	if listKind == "" {
		listKind = names.Kind + "List"
	}
	var kinds []*registry.Kind
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served {
			continue
		}
		vs := &version{c: c, v: v}
		k := &registry.Kind{
			Group: crd.Spec.Group, Version: v.Name,
			Kind: names.Kind, ListKind: listKind,
			Resource: names.Plural, Singular: names.Singular,
			ShortNames: names.ShortNames, Categories: names.Categories,
			Namespaced:     crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			Strategy:       vs,
			SchemaFunc:     vs.openAPISchema,
			Attrs:          vs.attrs,
			StorageVersion: storage,
			Generation:     true,
		}
		if terminating {
			k.Verbs = []string{"delete", "deletecollection", "get", "list", "patch", "update", "watch"}
		}
		if sr := v.Subresources; sr != nil {
			k.Status = sr.Status != nil
			if sc := sr.Scale; sc != nil {
				k.Scale = &registry.Scale{SpecReplicasPath: sc.SpecReplicasPath, StatusReplicasPath: sc.StatusReplicasPath}
				if sc.LabelSelectorPath != nil {
					k.Scale.LabelSelectorPath = *sc.LabelSelectorPath
				}
			}
		}
		if defs := v.AdditionalPrinterColumns; len(defs) > 0 {
			k.FullColumns = true
			k.ColumnsFunc = sync.OnceValue(func() []registry.Column {
				return append([]registry.Column{registry.NameColumn()}, columns(defs)...)
			})
		}
		k.FromStorage = vs.fromStorage
		k.ToStorage = vs.toStorage
		kinds = append(kinds, k)
	}
	return kinds
}

// StorageVersion is the version marked storage (the first served one if none is).
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	if len(crd.Spec.Versions) > 0 {
		return crd.Spec.Versions[0].Name
	}
	return ""
}

// compiled is what the versions of one CRD share.
type compiled struct {
	crd  *Stripped
	opts Options

	convOnce sync.Once
	conv     converter
}

func (c *compiled) converter() converter {
	c.convOnce.Do(func() { c.conv = newConverter(c.crd.CustomResourceDefinition, c.opts) })
	return c.conv
}

// version is one served version: its strategy, schema and conversion hooks.
type version struct {
	c *compiled
	v *apiextensionsv1.CustomResourceDefinitionVersion

	once   sync.Once
	schema *schemaSet
	err    error

	oapiOnce sync.Once
	oapi     *spec.Schema

	fieldsOnce sync.Once
	fields     []*selectableField
}

func (vs *version) apiVersion() string { return vs.c.crd.Spec.Group + "/" + vs.v.Name }

// fromStorage converts stored objects to this version, then defaults (and prunes) them
// with this version's schema, as upstream does on every read.
func (vs *version) fromStorage(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out, err := vs.c.converter().convert(ctx, objs, vs.apiVersion())
	if err != nil {
		return nil, err
	}
	s := vs.compiled()
	if s == nil || !s.hasDefaults {
		return out, nil
	}
	for i, o := range out {
		if o == objs[i] {
			o = o.DeepCopy() // the stored object may be shared (watch cache)
		}
		s.defaultAndPrune(o)
		out[i] = o
	}
	return out, nil
}

// toStorage prunes and defaults a validated object (status subresource writes skip the
// strategy) and converts it to the storage version.
func (vs *version) toStorage(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if s := vs.compiled(); s != nil {
		s.defaultAndPrune(obj)
	}
	target := vs.c.crd.Spec.Group + "/" + StorageVersion(vs.c.crd.CustomResourceDefinition)
	out, err := vs.c.converter().convert(ctx, []*unstructured.Unstructured{obj}, target)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}
