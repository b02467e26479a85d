package crd

import (
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// takenNames are the names of a group a CRD cannot take: those the group's other CRDs have
// accepted and those of the group's built-in resources.
type takenNames struct {
	// resources holds plurals, singulars and short names (they share the URL's resource
	// segment and kubectl's lookup); kinds holds kinds and list kinds.
	resources, kinds map[string]bool
}

func newTakenNames() takenNames {
	return takenNames{resources: map[string]bool{}, kinds: map[string]bool{}}
}

// add marks the names of one resource as taken.
func (t takenNames) add(n apiextensionsv1.CustomResourceDefinitionNames) {
	for _, r := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
		if r != "" {
			t.resources[r] = true
		}
	}
	for _, k := range []string{n.Kind, n.ListKind} {
		if k != "" {
			t.kinds[k] = true
		}
	}
}

// nameDecision is the names a CRD is served under and the conditions that report them.
type nameDecision struct {
	accepted      apiextensionsv1.CustomResourceDefinitionNames
	namesAccepted apiextensionsv1.CustomResourceDefinitionCondition
	established   apiextensionsv1.CustomResourceDefinitionCondition
}

// served says whether the CRD is served (under d.accepted).
func (d nameDecision) served() bool {
	return d.established.Status == apiextensionsv1.ConditionTrue
}

// decideNames is upstream's decision on a CRD's names (apiextensions-apiserver's naming and
// establishing controllers) given the names others hold:
//
//   - spec.names' plural, singular, short names (as one list), kind and list kind are each
//     accepted on their own, unless the name is new (not the accepted one) and taken; a
//     refused one keeps its accepted value, so that an established CRD stays served under
//     its old names. Categories are always accepted.
//   - NamesAccepted is True with reason NoConflicts, or False with the reason of the last
//     refused name (PluralConflict, SingularConflict, ShortNamesConflict, KindConflict,
//     ListKindConflict) and the message `"<name>" is already in use`.
//   - Established turns True once every name is accepted and stays True afterwards:
//     upstream never takes it back for a conflict. A CRD is served while it is established.
func decideNames(crd *apiextensionsv1.CustomResourceDefinition, taken takenNames) nameDecision {
	want, had := crd.Spec.Names, crd.Status.AcceptedNames
	accepted := had
	accepted.Categories = want.Categories
	var reason, message string
	// accept sets *to to name unless name is new and taken.
	accept := func(to *string, name string, used map[string]bool, conflict string) {
		if name != *to && used[name] {
			reason, message = conflict, inUse(name).Error()
			return
		}
		*to = name
	}
	accept(&accepted.Plural, want.Plural, taken.resources, "PluralConflict")
	accept(&accepted.Singular, want.Singular, taken.resources, "SingularConflict")
	if !slices.Equal(want.ShortNames, had.ShortNames) {
		var errs []error
		for _, s := range want.ShortNames {
			if !slices.Contains(had.ShortNames, s) && taken.resources[s] {
				errs = append(errs, inUse(s))
			}
		}
		if err := utilerrors.NewAggregate(errs); err != nil {
			reason, message = "ShortNamesConflict", err.Error()
		} else {
			accepted.ShortNames = want.ShortNames
		}
	}
	accept(&accepted.Kind, want.Kind, taken.kinds, "KindConflict")
	accept(&accepted.ListKind, want.ListKind, taken.kinds, "ListKindConflict")

	d := nameDecision{accepted: accepted}
	if reason == "" {
		d.namesAccepted = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found"}
	} else {
		d.namesAccepted = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse, Reason: reason, Message: message}
	}
	old := apihelpers.FindCRDCondition(crd, apiextensionsv1.Established)
	switch {
	// Kept only with a plural and a kind to serve: a status written by hand cannot make a
	// CRD served without them.
	case old != nil && old.Status == apiextensionsv1.ConditionTrue && accepted.Plural != "" && accepted.Kind != "":
		d.established = *old
	case reason == "":
		d.established = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}
	default:
		d.established = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}
	}
	return d
}

func inUse(name string) error { return fmt.Errorf("%q is already in use", name) }
