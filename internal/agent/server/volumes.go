package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Volumes are the node's local-path volume directories (internal/agent's LocalVolumes):
// what the local-path provisioner and the Volume kind's backups reach through the API
// server's nodes/<node>/proxy/volumes/<pv>.
type Volumes interface {
	// Create makes pv's directory (mode 0777) and returns its path; it is idempotent.
	Create(pv string) (string, error)
	// Remove removes pv's directory and everything in it; an absent one is no error.
	Remove(pv string) error
	// Archive writes a gzipped tar of pv's files to w (ErrNoVolume when it has no directory).
	Archive(ctx context.Context, pv string, w io.Writer) error
	// Restore unpacks a gzipped tar into pv's directory (made when missing); entries that
	// would land outside it are refused.
	Restore(ctx context.Context, pv string, r io.Reader) error
}

// ErrNoVolume is returned by Volumes.Archive for a volume without a directory.
var ErrNoVolume = errors.New("no such volume on this node")

// volumeRoutes serves the volume API (authorised as nodes/proxy like every other path):
//
//	POST   /volumes/{pv}          → 200 {"path": "<dir>"}
//	DELETE /volumes/{pv}          → 204
//	GET    /volumes/{pv}/archive  → 200 application/gzip (a tar of the files)
//	PUT    /volumes/{pv}/archive  → 204 (the body unpacked into the directory)
//
// Without Options.Volumes every one answers 501.
func (s *Server) volumeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /volumes/{pv}", s.volume(func(w http.ResponseWriter, r *http.Request, v Volumes, pv string) error {
		dir, err := v.Create(pv)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(map[string]string{"path": dir})
	}))
	mux.HandleFunc("DELETE /volumes/{pv}", s.volume(func(w http.ResponseWriter, r *http.Request, v Volumes, pv string) error {
		if err := v.Remove(pv); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	mux.HandleFunc("GET /volumes/{pv}/archive", s.volume(func(w http.ResponseWriter, r *http.Request, v Volumes, pv string) error {
		w.Header().Set("Content-Type", "application/gzip")
		return v.Archive(r.Context(), pv, w)
	}))
	mux.HandleFunc("PUT /volumes/{pv}/archive", s.volume(func(w http.ResponseWriter, r *http.Request, v Volumes, pv string) error {
		if err := v.Restore(r.Context(), pv, r.Body); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
}

// ValidVolumeName refuses a PV name that is not a DNS subdomain (so never a path). Pure.
func ValidVolumeName(pv string) error {
	if errs := validation.IsDNS1123Subdomain(pv); len(errs) > 0 {
		return fmt.Errorf("volume name %q: %s", pv, strings.Join(errs, "; "))
	}
	return nil
}

func (s *Server) volume(h func(http.ResponseWriter, *http.Request, Volumes, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Volumes == nil {
			http.Error(w, "this agent has no local volumes", http.StatusNotImplemented)
			return
		}
		pv := r.PathValue("pv")
		if err := ValidVolumeName(pv); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := h(w, r, s.opts.Volumes, pv); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ErrNoVolume) {
				code = http.StatusNotFound
			}
			s.opts.Log.Info("volume API", "method", r.Method, "pv", pv, "err", err)
			http.Error(w, err.Error(), code) // ignored by the client when the body was under way
		}
	}
}
