package crd

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	compiler "kubeos.dev/kube/internal/crd"
	"kubeos.dev/kube/internal/registry"
)

// names is spec.names or status.acceptedNames in short.
func names(plural, singular, kind string, shortNames ...string) apiextensionsv1.CustomResourceDefinitionNames {
	return apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List", ShortNames: shortNames}
}

// testCRD is a CRD of group with spec.names want; accepted and established (an Established
// condition True) describe its status.
func testCRD(t testing.TB, group string, want, accepted apiextensionsv1.CustomResourceDefinitionNames, established bool) *compiler.Stripped {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: want.Plural + "." + group, ResourceVersion: "1"},
		Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Names: want},
		Status:     apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: accepted},
	}
	if established {
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}}
	}
	s, err := compiler.Strip(crd)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testController is a controller with only what deciding names needs: the built-in kinds
// and an informer index holding crds.
func testController(t *testing.T, builtins []*registry.Kind, crds ...*compiler.Stripped) *Controller {
	t.Helper()
	c := &Controller{builtins: map[schema.GroupResource]*registry.Kind{}, accepted: map[string]acceptedNames{}}
	for _, k := range builtins {
		c.builtins[schema.GroupResource{Group: k.Group, Resource: k.Resource}] = k
	}
	c.indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byGroup: func(obj any) ([]string, error) {
		return []string{obj.(*compiler.Stripped).Spec.Group}, nil
	}})
	for _, crd := range crds {
		if err := c.indexer.Add(crd); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestDecideNames: each name is accepted or refused on its own against the names of the
// group's other CRDs and built-in resources; a refused name keeps its accepted value; an
// established CRD stays established (and served) through a conflict, a new one is not.
func TestDecideNames(t *testing.T) {
	const group = "db.example.com"
	database := names("databases", "database", "Database", "db")
	things := testCRD(t, group, names("things", "thing", "Thing", "th"), names("things", "thing", "Thing", "th"), true)
	deployments := &registry.Kind{Group: "apps", Version: "v1", Resource: "deployments", Singular: "deployment", ShortNames: []string{"deploy"}, Kind: "Deployment", ListKind: "DeploymentList"}
	accepted := func(reason, message string) apiextensionsv1.CustomResourceDefinitionCondition {
		if reason == "" {
			return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found"}
		}
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionFalse, Reason: reason, Message: message}
	}
	established := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}
	notEstablished := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}

	tests := []struct {
		name     string
		crd      *compiler.Stripped
		others   []*compiler.Stripped
		builtins []*registry.Kind
		want     nameDecision
	}{
		{name: "no conflict",
			crd:    testCRD(t, group, database, apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{things},
			want:   nameDecision{accepted: database, namesAccepted: accepted("", ""), established: established}},
		{name: "new CRD whose plural is taken",
			crd:    testCRD(t, group, names("th", "th2", "Th"), apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{things},
			want: nameDecision{accepted: apiextensionsv1.CustomResourceDefinitionNames{Singular: "th2", Kind: "Th", ListKind: "ThList"},
				namesAccepted: accepted("PluralConflict", `"th" is already in use`), established: notEstablished}},
		{name: "established CRD adds a taken short name",
			crd:    testCRD(t, group, names("databases", "database", "Database", "db", "th"), database, true),
			others: []*compiler.Stripped{things},
			want:   nameDecision{accepted: database, namesAccepted: accepted("ShortNamesConflict", `"th" is already in use`), established: established}},
		{name: "the taken short name is freed",
			crd:  testCRD(t, group, names("databases", "database", "Database", "db", "th"), database, true),
			want: nameDecision{accepted: names("databases", "database", "Database", "db", "th"), namesAccepted: accepted("", ""), established: established}},
		{name: "several short names taken",
			crd:    testCRD(t, group, names("databases", "database", "Database", "db", "th", "thing"), database, true),
			others: []*compiler.Stripped{things},
			want:   nameDecision{accepted: database, namesAccepted: accepted("ShortNamesConflict", `["th" is already in use, "thing" is already in use]`), established: established}},
		{name: "singular taken by a short name",
			crd:    testCRD(t, group, names("ths", "th", "Ths"), apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{things},
			want: nameDecision{accepted: apiextensionsv1.CustomResourceDefinitionNames{Plural: "ths", Kind: "Ths", ListKind: "ThsList"},
				namesAccepted: accepted("SingularConflict", `"th" is already in use`), established: notEstablished}},
		{name: "kind conflict",
			crd:    testCRD(t, group, apiextensionsv1.CustomResourceDefinitionNames{Plural: "stuffs", Singular: "stuff", Kind: "Thing", ListKind: "StuffList"}, apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{things},
			want: nameDecision{accepted: apiextensionsv1.CustomResourceDefinitionNames{Plural: "stuffs", Singular: "stuff", ListKind: "StuffList"},
				namesAccepted: accepted("KindConflict", `"Thing" is already in use`), established: notEstablished}},
		{name: "list kind conflict",
			crd:    testCRD(t, group, apiextensionsv1.CustomResourceDefinitionNames{Plural: "stuffs", Singular: "stuff", Kind: "Stuff", ListKind: "ThingList"}, apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{things},
			want: nameDecision{accepted: apiextensionsv1.CustomResourceDefinitionNames{Plural: "stuffs", Singular: "stuff", Kind: "Stuff"},
				namesAccepted: accepted("ListKindConflict", `"ThingList" is already in use`), established: notEstablished}},
		{name: "names of another group are free",
			crd:    testCRD(t, "other.example.com", names("things", "thing", "Thing", "th"), apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{things},
			want:   nameDecision{accepted: names("things", "thing", "Thing", "th"), namesAccepted: accepted("", ""), established: established}},
		{name: "conflict with a built-in resource",
			crd:      testCRD(t, "apps", names("widgets", "widget", "Widget", "deploy"), apiextensionsv1.CustomResourceDefinitionNames{}, false),
			builtins: []*registry.Kind{deployments},
			want: nameDecision{accepted: names("widgets", "widget", "Widget"),
				namesAccepted: accepted("ShortNamesConflict", `"deploy" is already in use`), established: notEstablished}},
		{name: "names held by a CRD that is not established are taken",
			crd: testCRD(t, group, names("stuffs", "stuff", "Stuff", "st"), apiextensionsv1.CustomResourceDefinitionNames{}, false),
			others: []*compiler.Stripped{testCRD(t, group, names("things", "thing", "Thing", "st"),
				apiextensionsv1.CustomResourceDefinitionNames{Singular: "thing", Kind: "Thing", ListKind: "ThingList", ShortNames: []string{"st"}}, false)},
			want: nameDecision{accepted: names("stuffs", "stuff", "Stuff"),
				namesAccepted: accepted("ShortNamesConflict", `"st" is already in use`), established: notEstablished}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testController(t, tt.builtins, append(tt.others, tt.crd)...)
			got := c.decide(tt.crd)
			if !equality.Semantic.DeepEqual(got.accepted, tt.want.accepted) {
				t.Errorf("accepted names\n %+v\nwant\n %+v", got.accepted, tt.want.accepted)
			}
			if got.namesAccepted != tt.want.namesAccepted {
				t.Errorf("NamesAccepted\n %+v\nwant\n %+v", got.namesAccepted, tt.want.namesAccepted)
			}
			if got.established != tt.want.established {
				t.Errorf("Established\n %+v\nwant\n %+v", got.established, tt.want.established)
			}
			if got.served() != (tt.want.established.Status == apiextensionsv1.ConditionTrue) {
				t.Errorf("served %v with Established %s", got.served(), got.established.Status)
			}
		})
	}
}

// TestDecidedNamesAreTaken: names decided for one CRD are taken for the others of its group
// at once, before the informer shows the status written with them; once the informer shows
// a newer version of the CRD, its status.acceptedNames count.
func TestDecidedNamesAreTaken(t *testing.T) {
	const group = "db.example.com"
	first := testCRD(t, group, names("firsts", "first", "First", "x"), apiextensionsv1.CustomResourceDefinitionNames{}, false)
	second := testCRD(t, group, names("seconds", "second", "Second", "x"), apiextensionsv1.CustomResourceDefinitionNames{}, false)
	c := testController(t, nil, first, second)
	if d := c.decide(first); !d.served() {
		t.Fatalf("first: %+v", d.namesAccepted)
	}
	if d := c.decide(second); d.served() || d.namesAccepted.Reason != "ShortNamesConflict" {
		t.Fatalf("second took the short name the first was given: %+v", d.namesAccepted)
	}
	// The first's status comes back without the short name (its spec dropped it meanwhile).
	updated := testCRD(t, group, names("firsts", "first", "First"), names("firsts", "first", "First"), true)
	updated.ResourceVersion = "2"
	if err := c.indexer.Update(updated); err != nil {
		t.Fatal(err)
	}
	if d := c.decide(second); !d.served() {
		t.Fatalf("second after the first freed the short name: %+v", d.namesAccepted)
	}
}
