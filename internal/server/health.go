package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"kubeos.dev/kube/internal/storage"
)

// health serves /healthz, /livez and /readyz as kube-apiserver does: "ok", or with ?verbose
// one line per check; /readyz/<check> runs one check. A failing check answers 500 and names it.
type health struct {
	client *clientv3.Client
	// overrides are the etcd clusters of --etcd-servers-overrides (storage.Store.Clusters
	// after the main one): each is a check of its own, etcd-override-<i>, as upstream's.
	overrides []*storage.Store
	ready     <-chan struct{}
	// bus reports the lifecycle event bus (Redis reachable); nil skips the check.
	bus func() error
}

type check struct {
	name string
	run  func(ctx context.Context) error
}

func (h *health) checks(readiness bool) []check {
	cs := []check{
		{"ping", func(context.Context) error { return nil }},
		{"etcd", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := h.client.Get(ctx, "/registry/health", clientv3.WithCountOnly())
			return err
		}},
	}
	for i, st := range h.overrides {
		cs = append(cs, check{fmt.Sprintf("etcd-override-%d", i), func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := st.CurrentRevision(ctx)
			return err
		}})
	}
	if readiness && h.bus != nil {
		cs = append(cs, check{"event-bus", func(context.Context) error { return h.bus() }})
	}
	if readiness {
		cs = append(cs, check{"bootstrap", func(context.Context) error {
			select {
			case <-h.ready:
				return nil
			default:
				return fmt.Errorf("bootstrap objects and controllers are not ready yet")
			}
		}})
	}
	return cs
}

func (h *health) handler(endpoint string, readiness bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks := h.checks(readiness)
		if sub := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"+endpoint), "/"); sub != "" {
			var only []check
			for _, c := range checks {
				if c.name == sub {
					only = append(only, c)
				}
			}
			if len(only) == 0 {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				http.Error(w, "no such check: "+sub, http.StatusNotFound)
				return
			}
			checks = only
		}
		exclude := map[string]bool{}
		for _, e := range r.URL.Query()["exclude"] {
			exclude[e] = true
		}
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if exclude[c.name] {
				fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if err := c.run(r.Context()); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", c.name)
				continue
			}
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, verbose := r.URL.Query()["verbose"]
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", b.String(), endpoint)
			return
		}
		if verbose {
			fmt.Fprintf(w, "%s%s check passed\n", b.String(), endpoint)
			return
		}
		fmt.Fprint(w, "ok")
	})
}

// Version is the Kubernetes API version Kube serves, in kubectl's strict semver form.
const Version = "v1.37.2+kube"

func versionInfo() version.Info {
	return version.Info{
		Major: "1", Minor: "37", GitVersion: Version, GitTreeState: "clean",
		BuildDate: "2026-11-30T00:00:00Z", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

func notFound(path string) *apierrors.StatusError {
	se := apierrors.NewNotFound(schema.GroupResource{}, "")
	se.ErrStatus.Message = "the server could not find the requested resource"
	se.ErrStatus.Details = nil
	return se
}
