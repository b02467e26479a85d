package crd

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kubeos.dev/kube/internal/registry"
)

// Options configure compiled CRDs.
type Options struct {
	// ResolveService turns a conversion webhook's service reference (namespace, name,
	// Service port) into the URL of a ready endpoint; it is asked on every conversion, and
	// the endpoint's certificate must name <service>.<namespace>.svc. nil: CRDs whose
	// webhook names a service fail conversions with an error that says to use
	// clientConfig.url.
	ResolveService func(namespace, name string, port int32) (*url.URL, error)
}

// Compile returns one Kind per served version of crd, served under names: the CRD's
// status.acceptedNames, as upstream serves them, which keep a name's previous value while
// the one in spec.names conflicts with another resource. crd must not be changed afterwards
// (the Kinds keep it and decode a version's schema on its first request). Terminating: the
// Kinds refuse create, as upstream does while a CRD's custom resources are being deleted.
func Compile(crd *Stripped, names apiextensionsv1.CustomResourceDefinitionNames, o Options, terminating bool) []*registry.Kind {
	c := &compiled{crd: crd, kind: names.Kind, opts: o}
	storage := StorageVersion(crd.CustomResourceDefinition)
	c.versions = make(map[string]*version, len(crd.Spec.Versions))
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		c.versions[v.Name] = &version{c: c, v: v}
	}
	c.storage = c.versions[storage]
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
		vs := c.versions[v.Name]
		k := &registry.Kind{
			Group: crd.Spec.Group, Version: v.Name,
			Kind: names.Kind, ListKind: listKind,
			Resource: names.Plural, Singular: names.Singular,
			ShortNames: names.ShortNames, Categories: names.Categories,
			Namespaced:     crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			Strategy:       vs,
			SchemaFunc:     vs.openAPISchema,
			SchemaV2Func:   vs.openAPISchemaV2,
			Attrs:          vs.attrs,
			StorageVersion: storage,
			Generation:     true,

			DeprecationWarning: deprecationWarning(&crd.Spec, v),
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
	crd *Stripped
	// kind is the accepted kind the objects are validated as.
	kind string
	opts Options

	convOnce sync.Once
	conv     converter

	// versions are every version of the CRD, served or not, by name; storage is the one
	// objects are stored in (nil if the CRD has no versions).
	versions map[string]*version
	storage  *version
}

func (c *compiled) converter() converter {
	c.convOnce.Do(func() { c.conv = newConverter(c.crd.CustomResourceDefinition, c.opts) })
	return c.conv
}

// version is one version of a CRD: its strategy, schema and conversion hooks.
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

// fromStorage converts stored objects to this version. Objects the conversion changed are
// then coerced with this version's schema, as upstream does after every conversion (the
// versions' schemas differ, a webhook may add fields), and every object is defaulted if
// the schema has defaults. Objects neither converted nor defaulted are returned as stored:
// they were pruned with this schema when written, so reads in the storage version cost
// nothing. Stored objects may be shared (watch cache): changed ones are copied first.
func (vs *version) fromStorage(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out, err := vs.c.converter().convert(ctx, objs, vs.apiVersion())
	if err != nil {
		return nil, err
	}
	s := vs.compiled()
	if s == nil {
		return out, nil
	}
	for i, o := range out {
		converted := o != objs[i]
		if !converted && !s.hasDefaults {
			continue
		}
		if converted {
			if err := s.coerce(o); err != nil {
				return nil, fmt.Errorf("%s %s converted to %s: %w", vs.c.crd.Spec.Names.Kind, objectName(o), vs.v.Name, err)
			}
			s.applyDefaults(o)
			continue
		}
		if &out[0] == &objs[0] {
			out = slices.Clone(out) // the converters return objs itself when nothing converts
		}
		o = o.DeepCopy()
		s.defaultAndPrune(o)
		out[i] = o
	}
	return out, nil
}

// toStorage prunes and defaults a validated object (status subresource writes skip the
// strategy) and converts it to the storage version; a converted object is then coerced with
// the storage version's schema, as upstream does before it stores it.
func (vs *version) toStorage(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if s := vs.compiled(); s != nil {
		s.defaultAndPrune(obj)
	}
	st := vs.c.storage
	if st == nil {
		return obj, nil
	}
	out, err := vs.c.converter().convert(ctx, []*unstructured.Unstructured{obj}, st.apiVersion())
	if err != nil {
		return nil, err
	}
	if out[0] == obj {
		return obj, nil
	}
	if s := st.compiled(); s != nil {
		if err := s.coerce(out[0]); err != nil {
			return nil, fmt.Errorf("%s %s converted to %s: %w", vs.c.crd.Spec.Names.Kind, objectName(obj), st.v.Name, err)
		}
	}
	return out[0], nil
}
