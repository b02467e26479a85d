package ctl

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"kubeos.dev/kube/internal/ctl/opsapi"
	"kubeos.dev/kube/internal/server"
)

// apiGet GETs an API path with a bearer token.
func apiGet(t *testing.T, token, path string) (int, string) {
	t.Helper()
	b := newBrowser(t)
	req, err := http.NewRequest(http.MethodGet, dashboardSrv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// TestObjectsPageIsAuthorizedAsTheUser: the ops API's objects pages (what filtered and sorted
// kind lists read) show a kind only to a user who may list it in that scope, and page what
// matched.
func TestObjectsPageIsAuthorizedAsTheUser(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	ctx := context.Background()
	// A user with the ops API's role in shop, and no right on the kinds themselves.
	opsOnly, err := saToken(ctx, "shop", "ops-only", server.OpsViewRole, true)
	if err != nil {
		t.Fatal(err)
	}
	base := "/apis/" + opsapi.Group + "/" + opsapi.Version
	tests := []struct {
		name, token, path string
		code              int
		want, notWant     []string
	}{
		{"admin, Pending in shop", adminToken, base + "/namespaces/shop/objects?kind=Credential&phase=Pending&sort=name", http.StatusOK,
			[]string{`"name":"consumer"`, `"name":"orphan"`}, []string{`"name":"app"`}},
		{"admin, all namespaces, text filter", adminToken, base + "/objects?kind=credentials&q=secret-one", http.StatusOK,
			[]string{`"namespace":"elsewhere"`, `"name":"secret-one"`, `"matched":1`}, nil},
		{"viewer of shop, in shop", viewerToken, base + "/namespaces/shop/objects?kind=Credential&sort=-name&limit=1&offset=1", http.StatusOK,
			[]string{`"offset":1`}, nil},
		{"viewer of shop, in elsewhere", viewerToken, base + "/namespaces/elsewhere/objects?kind=Credential", http.StatusForbidden,
			nil, []string{"secret-one"}},
		{"viewer of shop, all namespaces", viewerToken, base + "/objects?kind=Credential", http.StatusForbidden, nil, []string{"secret-one", "consumer"}},
		{"ops role only: may not list credentials", opsOnly, base + "/namespaces/shop/objects?kind=Credential", http.StatusForbidden,
			[]string{`cannot list resource \"credentials\"`}, []string{"consumer"}},
		{"bad sort", adminToken, base + "/namespaces/shop/objects?kind=Credential&sort=size", http.StatusBadRequest, []string{"sort"}, nil},
		{"bad limit", adminToken, base + "/namespaces/shop/objects?kind=Credential&limit=100000", http.StatusBadRequest, []string{"limit"}, nil},
		{"bad offset", adminToken, base + "/namespaces/shop/objects?kind=Credential&offset=-1", http.StatusBadRequest, []string{"offset"}, nil},
		{"unknown kind", adminToken, base + "/namespaces/shop/objects?kind=Widget", http.StatusBadRequest, []string{"not a lifecycle-managed kind"}, nil},
		{"cluster-scoped kind in a namespace", adminToken, base + "/namespaces/shop/objects?kind=Tenant", http.StatusBadRequest, []string{"cluster-scoped"}, nil},
	}
	for _, tt := range tests {
		code, body := apiGet(t, tt.token, tt.path)
		if code != tt.code {
			t.Errorf("%s: %d, want %d\n%s", tt.name, code, tt.code, body)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: lacks %s\n%s", tt.name, w, body)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(body, w) {
				t.Errorf("%s: shows %s\n%s", tt.name, w, body)
			}
		}
	}
	// The viewer's page of one, from offset 1 in reverse name order, is the second of what
	// they may list in shop.
	_, body := apiGet(t, viewerToken, base+"/namespaces/shop/objects?kind=Credential&sort=-name")
	var all opsapi.ObjectList
	if err := json.Unmarshal([]byte(body), &all); err != nil || len(all.Items) < 2 || all.Matched != len(all.Items) {
		t.Fatalf("viewer's list: %v\n%s", err, body)
	}
	_, body = apiGet(t, viewerToken, base+"/namespaces/shop/objects?kind=Credential&sort=-name&limit=1&offset=1")
	var one opsapi.ObjectList
	if err := json.Unmarshal([]byte(body), &one); err != nil || len(one.Items) != 1 || one.Items[0].Name != all.Items[1].Name || one.Matched != all.Matched {
		t.Errorf("page of one at offset 1: %v %+v, want %s of %d", err, one, all.Items[1].Name, all.Matched)
	}
}

// TestFilteredListPagesOnTheServer: a filtered, sorted kind list as the viewer shows what
// matched, and its paging links follow the filter.
func TestFilteredListPagesOnTheServer(t *testing.T) {
	dashboardSuite.Need(t)
	setup(t)
	b := newBrowser(t)
	b.login(t, viewerToken)
	res, page := b.get(t, "/ui/kinds/credentials?ns=shop&phase=Pending&sort=-name")
	i, j := strings.Index(page, `data-name="orphan"`), strings.Index(page, `data-name="consumer"`)
	if res.StatusCode != http.StatusOK || i < 0 || j < 0 || i > j || strings.Contains(page, `data-name="app"`) || !strings.Contains(page, " matching") {
		t.Errorf("phase=Pending sort=-name as the viewer: %d, orphan at %d, consumer at %d\n%s", res.StatusCode, i, j, page)
	}
	if res, _ := b.get(t, "/ui/kinds/credentials?ns=elsewhere&phase=Pending"); res.StatusCode != http.StatusForbidden {
		t.Errorf("viewer's filtered list in elsewhere: %d, want 403", res.StatusCode)
	}
	if res, _ := b.get(t, "/ui/kinds/credentials?ns=shop&phase=Pending&page=99999999999"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("page out of range: %d, want 400", res.StatusCode)
	}
}
