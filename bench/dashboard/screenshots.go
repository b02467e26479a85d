package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// scenario is a small shop: a chain three deep, a Credential whose Secret is taken (Failed)
// and one blocked by it, a missing dependency, a deletion held by a finalizer.
const scenario = `apiVersion: kubeos.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec: {environments: [dev]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: root-ca, namespace: shop}
spec: {isCA: true, commonName: root-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Certificate
metadata: {name: web, namespace: shop}
spec: {dnsNames: [web.example.com], issuer: root-ca}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: app, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Certificate, name: web}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: client, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: app}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: both, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: app}, {kind: Certificate, name: web}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: taken, namespace: shop}
spec: {type: password, length: 16}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: consumer, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Credential, name: taken}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: orphan, namespace: shop}
spec: {type: password, length: 16, dependsOn: [{kind: Certificate, name: nope}]}
---
apiVersion: kubeos.dev/v1alpha1
kind: Credential
metadata: {name: held, namespace: shop, finalizers: [example.com/hold]}
spec: {type: password, length: 16}
`

func (e *env) apply(ctx context.Context, docs string) error {
	for _, doc := range strings.Split(docs, "\n---\n") {
		var o unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return err
		}
		res := strings.ToLower(o.GetKind()) + "s"
		ri := e.dyn.Resource(gvr(res))
		var err error
		if ns := o.GetNamespace(); ns != "" {
			_, err = ri.Namespace(ns).Create(ctx, &o, metav1.CreateOptions{})
		} else {
			_, err = ri.Create(ctx, &o, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("create %s/%s: %w", res, o.GetName(), err)
		}
	}
	return nil
}

func (e *env) waitPhase(ctx context.Context, res, ns, name, phase string) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		o, err := e.dyn.Resource(gvr(res)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if p, _, _ := unstructured.NestedString(o.Object, "status", "phase"); p == phase {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s/%s not %s within 90 s", res, ns, name, phase)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// screenshots saves PNGs of the main views into dir.
func screenshots(dir, chromium string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	e, err := start(false)
	if err != nil {
		return err
	}
	defer e.stop()
	ctx := context.Background()
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := e.cs.CoreV1().Secrets("shop").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		StringData: map[string]string{"password": "not-managed"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.apply(ctx, scenario); err != nil {
		return err
	}
	for n, p := range map[string]string{"app": "Active", "client": "Active", "taken": "Failed", "consumer": "Pending", "held": "Active"} {
		if err := e.waitPhase(ctx, "credentials", "shop", n, p); err != nil {
			return err
		}
	}
	if err := e.dyn.Resource(gvr("credentials")).Namespace("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		return err
	}
	admin, err := e.token(ctx, "kube-system", "screenshots", "cluster-admin", false)
	if err != nil {
		return err
	}
	viewer, err := e.token(ctx, "shop", "viewer", "view", true)
	if err != nil {
		return err
	}
	bctx, stop, err := browser(chromium, 1280, 800)
	if err != nil {
		return err
	}
	defer stop()
	tctx, cancel := context.WithTimeout(bctx, 5*time.Minute)
	defer cancel()
	shot := func(name, path string, steps ...chromedp.Action[chromedp.Void]) error {
		all := append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.ts.URL + path), chromedp.WaitVisible(chromedp.CSS("#content"))}, steps...)
		if err := chromedp.Do(tctx, all...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		f := filepath.Join(dir, "dashboard-"+name+".png")
		if err := os.WriteFile(f, png, 0o644); err != nil {
			return err
		}
		emit(map[string]any{"screenshot": f, "bytes": len(png)})
		return nil
	}
	if err := shot("login", "/ui/login"); err != nil {
		return err
	}
	if err := login(tctx, e.ts.URL, admin); err != nil {
		return err
	}
	for _, s := range []struct{ name, path string }{
		{"health", "/ui/"},
		{"kind", "/ui/kinds/credentials?ns=shop"},
		{"object-blocked", "/ui/objects/credentials/shop/consumer"},
		{"object-graph", "/ui/objects/certificates/shop/web"},
		{"object-deleting", "/ui/objects/credentials/shop/held"},
	} {
		if err := shot(s.name, s.path, chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`))); err != nil {
			return err
		}
	}
	// The viewer (a new login replaces the session cookie): read-only, told why.
	if err := login(tctx, e.ts.URL, viewer); err != nil {
		return err
	}
	return shot("viewer-refused", "/ui/objects/credentials/shop/app",
		chromedp.Click(chromedp.CSS("#denied-delete summary")), chromedp.WaitVisible(chromedp.CSS("#denied-delete .why")))
}
