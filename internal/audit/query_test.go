package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

func TestQueryMatch(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ev := &auditv1.Event{Stage: auditv1.StageResponseComplete, Verb: "update",
		User:             authnv1.UserInfo{Username: "system:kube-controller:lifecycle"},
		ImpersonatedUser: &authnv1.UserInfo{Username: "bob"},
		ObjectRef:        &auditv1.ObjectReference{Resource: "credentials", Namespace: "shop", Name: "app", UID: "u-1"},
		Annotations:      map[string]string{AnnotationOperator: "system:kube-controller:lifecycle", AnnotationPhase: "Active"},
		StageTimestamp:   metav1.NewMicroTime(t0)}
	for _, tc := range []struct {
		q    Query
		want bool
	}{
		{Query{}, true},
		{Query{UID: "u-1", Namespace: "shop", Phase: "active", Operator: "system:kube-controller:lifecycle"}, true},
		{Query{UID: "u-2"}, false},
		{Query{Namespace: "other"}, false},
		{Query{Phase: "Failed"}, false},
		{Query{Operator: "kube-admin"}, false},
		{Query{User: "bob"}, true},
		{Query{User: "system:kube-controller:lifecycle"}, true},
		{Query{User: "carol"}, false},
		{Query{Since: t0}, true},
		{Query{Since: t0.Add(time.Second)}, false},
	} {
		if got := tc.q.Match(ev); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.q, got, tc.want)
		}
	}
	received := *ev
	received.Stage = auditv1.StageRequestReceived
	if (Query{}).Match(&received) {
		t.Error("a RequestReceived stage matches (each request would count twice)")
	}
}

func TestSearchAcrossRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	line := func(uid, ns string) string {
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"ResponseComplete","requestURI":"/","verb":"get","user":{"username":"u"},"objectRef":{"resource":"credentials","namespace":"` + ns + `","name":"n","uid":"` + uid + `"},"requestReceivedTimestamp":"2026-12-01T12:00:00.000000Z","stageTimestamp":"2026-12-01T12:00:00.000000Z"}` + "\n"
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "audit-2026-12-01T10-00-00.000.log"), []byte(line("a", "x")+line("b", "x")), 0o600))
	must(os.WriteFile(filepath.Join(dir, "audit-2026-12-01T11-00-00.000.log"), []byte(line("a", "y")+"not json\n"), 0o600))
	must(os.WriteFile(path, []byte(line("a", "x")+line("a", "z")), 0o600))
	files, err := Files(path)
	must(err)
	if len(files) != 3 || files[2] != path || !strings.Contains(files[0], "T10") {
		t.Fatalf("files %v", files)
	}
	allow := func(ev *auditv1.Event) bool { return ev.ObjectRef.Namespace != "y" }
	out, hidden, truncated, err := Search(files, Query{UID: "a"}, allow, 2)
	must(err)
	if len(out) != 2 || hidden != 1 || !truncated || out[0].ObjectRef.Namespace != "x" || out[1].ObjectRef.Namespace != "z" {
		t.Fatalf("out %d (%v), hidden %d, truncated %v", len(out), out, hidden, truncated)
	}
}

func TestEachLineReverse(t *testing.T) {
	// Lines of many lengths across several read chunks, an empty line, no final newline.
	var want []string
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		l := strings.Repeat(string(rune('a'+i%26)), (i*37)%700) + fmt.Sprint(i)
		want = append(want, l)
		b.WriteString(l)
		if i == 1000 {
			b.WriteString("\n")
		}
		if i < 2999 {
			b.WriteString("\n")
		}
	}
	path := filepath.Join(t.TempDir(), "lines")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := eachLineReverse(path, func(l []byte) error { got = append(got, string(l)); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(got)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

func TestSearchStopsAtSince(t *testing.T) {
	const micro = "2006-01-02T15:04:05.000000Z" // metav1.MicroTime's encoding
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	line := func(uid string, at time.Time) string {
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"ResponseComplete","requestURI":"/","verb":"get","user":{"username":"u"},"objectRef":{"resource":"credentials","namespace":"x","name":"n","uid":"` + uid + `"},"requestReceivedTimestamp":"` + at.Format(micro) + `","stageTimestamp":"` + at.Format(micro) + `"}` + "\n"
	}
	dir := t.TempDir()
	old := filepath.Join(dir, "audit-2026-12-01T10-00-00.000.log")
	cur := filepath.Join(dir, "audit.log")
	// The older "file" is a directory, which fails to read: a search bounded by since or
	// by its limit stops before it.
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < 100; i++ {
		b.WriteString(line("a", t0.Add(time.Duration(i)*time.Minute)))
	}
	if err := os.WriteFile(cur, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	seen := 0
	allow := func(*auditv1.Event) bool { seen++; return true }
	out, _, truncated, err := Search([]string{old, cur}, Query{UID: "a", Since: t0.Add(90 * time.Minute)}, allow, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 10 || truncated || !out[0].StageTimestamp.Time.Equal(t0.Add(90*time.Minute)) || !out[9].StageTimestamp.Time.Equal(t0.Add(99*time.Minute)) {
		t.Fatalf("since: %d events, truncated %v", len(out), truncated)
	}
	// The slack: at most a minute's worth read past since.
	if seen > 11 {
		t.Errorf("read %d matching events for 10 since the bound", seen)
	}
	out, _, truncated, err = Search([]string{old, cur}, Query{UID: "a"}, nil, 3)
	if err != nil || len(out) != 3 || !truncated || !out[2].StageTimestamp.Time.Equal(t0.Add(99*time.Minute)) {
		t.Fatalf("limit: %d events, truncated %v, err %v", len(out), truncated, err)
	}
}
