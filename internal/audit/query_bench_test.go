package audit

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSearch queries an audit log of 200,000 events (one a second, about 75 MB) the way
// `kube ctl audit` does: by UID over the last hour, everything over the last 10 minutes, and by
// UID with no time bound (the whole file either way).
func BenchmarkSearch(b *testing.B) {
	const n = 200000
	path := filepath.Join(b.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000000Z")
		fmt.Fprintf(w, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%08d-0000-4000-8000-000000000000","stage":"ResponseComplete","requestURI":"/apis/kubeos.dev/v1alpha1/namespaces/ns-%d/credentials/c-%d","verb":"update","user":{"username":"system:serviceaccount:kube-system:lifecycle","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"kube/v1.37.2","objectRef":{"resource":"credentials","namespace":"ns-%d","name":"c-%d","uid":"uid-%d","apiGroup":"kubeos.dev","apiVersion":"v1alpha1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"%s","stageTimestamp":"%s","annotations":{"lifecycle.kubeos.dev/operator":"credential","lifecycle.kubeos.dev/phase":"Active"}}`+"\n",
			i, i%20, i%1000, i%20, i%1000, i%1000, at, at)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	end := t0.Add(n * time.Second)
	for _, c := range []struct {
		name string
		q    Query
	}{
		{"uid,since=1h", Query{UID: "uid-7", Since: end.Add(-time.Hour)}},
		{"all,since=10m", Query{Since: end.Add(-10 * time.Minute)}},
		{"uid,no-since", Query{UID: "uid-7"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, _, _, err := Search([]string{path}, c.q, nil, 500); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
