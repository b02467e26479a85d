package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	crdcontroller "kubeos.dev/kube/internal/controllers/crd"
)

// SystemNamespaces exist from the first start.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap creates the system namespaces through the API, as any client would.
func (s *Server) bootstrap(ctx context.Context) error {
	cfg, err := s.LoopbackConfig("system:apiserver", "system:masters")
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, ns := range SystemNamespaces {
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				return true, nil
			}
			s.opts.Log.Warn("bootstrap: create namespace", "namespace", ns, "err", err)
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("bootstrap namespace %s: %w", ns, err)
		}
	}
	return nil
}

// startControllers starts the built-in controllers; each stops when ctx ends and wg tracks them.
func (s *Server) startControllers(ctx context.Context, wg *sync.WaitGroup) error {
	// Namespace deletion and garbage collection run on the server holding their Lease.
	if err := s.startElectedControllers(ctx, wg); err != nil {
		return err
	}
	return s.startCRDController(ctx, wg)
}

// startCRDController starts the CRD controller: registration of CRD kinds in this server's
// registry, CRD status, deletion and storage-version migration.
func (s *Server) startCRDController(ctx context.Context, wg *sync.WaitGroup) error {
	cfg, err := s.LoopbackConfig("system:kube-controller:crd-controller", "system:kube-controllers")
	if err != nil {
		return err
	}
	cc, err := crdcontroller.New(crdcontroller.Options{Config: cfg, Registry: s.Registry, Caches: s.caches, Log: s.opts.Log.With("controller", "crd")})
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := cc.Start(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Error("crd controller stopped", "err", err)
		}
	}()
	return nil
}
