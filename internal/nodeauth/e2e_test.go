package nodeauth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"kubeos.dev/kube/internal/pki"
	"kubeos.dev/kube/internal/server/servertest"
)

var srv *servertest.Server

func TestMain(m *testing.M) {
	dir, err := servertest.TempDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = servertest.Start(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// nodeClient is a client for node name with a client certificate minted as `kube certs
// user system:node:<name> --group system:nodes` mints it: the CA loaded from the data
// directory, a kubeconfig written and read back.
func nodeClient(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	user := "system:node:" + name
	certPEM, keyPEM, err := ca.IssueClientCert(user, []string{"system:nodes"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := pki.WriteKubeconfig(path, srv.URL, ca.CAPEM, certPEM, keyPEM, user); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	return kubernetes.NewForConfigOrDie(cfg)
}

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func forbidden(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("%s: %v, want 403 Forbidden", what, err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: %q, want it to say %q", what, err.Error(), msg)
	}
}

func pod(name, node string, secret string, configMap string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}},
				// The audience its node may request tokens for (NodeRestriction's
				// ServiceAccountNodeAudienceRestriction).
				{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "token"}}}}}}},
		},
	}
	if configMap != "" {
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}
	}
	return p
}

// TestNodeAuthorization: node n1, authenticated by a client certificate in system:nodes,
// reads its own Node but not n2's, the secret and configmap its pod uses but not another
// node's pod's secret nor an unrelated one, updates its pod's status but not that of n2's
// pod, holds its own Lease only, gets tokens for its pod's service account only, reads the
// claim and volume its pod mounts only; access reviews (SubjectAccessReview, kubectl auth
// can-i) answer the same; deleting its pod takes the pod's secret away.
func TestNodeAuthorization(t *testing.T) {
	ctx := context.Background()
	cs := admin(t)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	const ns = "node-authz"
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}, metav1.CreateOptions{}))
	for _, n := range []string{"n1", "n2"} {
		must(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}))
	}
	for _, s := range []string{"s1", "s2", "other"} {
		must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s}, StringData: map[string]string{"k": s}}, metav1.CreateOptions{}))
	}
	must(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}))
	// The ServiceAccount admission plugin wants the namespace's default ServiceAccount,
	// which the serviceaccount controller creates.
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("p1", "n1", "s1", "c1"), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	must(cs.CoreV1().Pods(ns).Create(ctx, pod("p2", "n2", "s2", ""), metav1.CreateOptions{}))

	n1 := nodeClient(t, "n1")
	// The graph follows the pods through the authorizer's informers.
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := n1.CoreV1().Secrets(ns).Get(ctx, "s1", metav1.GetOptions{})
		return err
	})

	if _, err := n1.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Fatalf("n1 reads its Node: %v", err)
	}
	_, err := n1.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	forbidden(t, "n1 reads node n2", err, `User "system:node:n1" cannot get resource "nodes" in API group "" at the cluster scope: node: node 'n1' cannot read 'n2', only its own Node object`)
	_, err = n1.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	forbidden(t, "n1 lists nodes", err, "cannot read all nodes")

	if _, err := n1.CoreV1().ConfigMaps(ns).Get(ctx, "c1", metav1.GetOptions{}); err != nil {
		t.Fatalf("n1 reads its pod's configmap: %v", err)
	}
	_, err = n1.CoreV1().Secrets(ns).Get(ctx, "s2", metav1.GetOptions{})
	forbidden(t, "n1 reads n2's pod's secret", err, "no relationship found between node 'n1' and this object")
	_, err = n1.CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{})
	forbidden(t, "n1 reads an unrelated secret", err, "no relationship found")
	_, err = n1.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	forbidden(t, "n1 lists secrets", err, "secrets")
	s1, err := n1.CoreV1().Secrets(ns).Get(ctx, "s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = n1.CoreV1().Secrets(ns).Update(ctx, s1, metav1.UpdateOptions{})
	forbidden(t, "n1 writes its pod's secret", err, "can only read resources of this type")

	// Pod status: the Node authorizer allows pods/status, NodeRestriction admission keeps a
	// node to its own pods.
	p1, err := n1.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("n1 reads its pod: %v", err)
	}
	p1.Status.Conditions = append(p1.Status.Conditions, corev1.PodCondition{Type: "example.com/Checked", Status: corev1.ConditionTrue})
	if _, err := n1.CoreV1().Pods(ns).UpdateStatus(ctx, p1, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("n1 updates its pod's status: %v", err)
	}
	_, err = n1.CoreV1().Pods(ns).Get(ctx, "p2", metav1.GetOptions{})
	forbidden(t, "n1 reads n2's pod", err, "no relationship found")
	p2, err := cs.CoreV1().Pods(ns).Get(ctx, "p2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p2.Status.Conditions = append(p2.Status.Conditions, corev1.PodCondition{Type: "example.com/Checked", Status: corev1.ConditionTrue})
	_, err = n1.CoreV1().Pods(ns).UpdateStatus(ctx, p2, metav1.UpdateOptions{})
	forbidden(t, "n1 updates n2's pod's status", err, "n1")
	_, err = n1.CoreV1().Pods(ns).Update(ctx, p1, metav1.UpdateOptions{})
	forbidden(t, "n1 updates its pod's spec", err, "pods")

	// Leases: its own only.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40)}}
	if _, err := n1.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("n1 creates its Lease: %v", err)
	}
	if _, err := n1.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Fatalf("n1 reads its Lease: %v", err)
	}
	_, err = n1.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n2", metav1.GetOptions{})
	forbidden(t, "n1 reads n2's Lease", err, "can only access node lease with the same name")

	// Tokens: for the service account its pod runs as, bound to that pod (NodeRestriction
	// wants the binding) and for an audience the pod's volumes name (token requests go
	// through admission, as on kube-apiserver); not for another service account or audience.
	must(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "unused"}}, metav1.CreateOptions{}))
	tokenFor := func(sa, audience string) error {
		_, err := n1.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "p1", UID: p1.UID}}}, metav1.CreateOptions{})
		return err
	}
	token := func(sa string) error { return tokenFor(sa, "vault") }
	forbidden(t, "n1 requests a token for an audience its pod does not use", tokenFor("default", "elsewhere"),
		`system:node:n1 is not authorized to request tokens for audience "elsewhere"`)
	if p1.Spec.ServiceAccountName != "default" {
		t.Fatalf("pod p1 runs as %q, want default", p1.Spec.ServiceAccountName)
	}
	if err := token("default"); err != nil {
		t.Fatalf("n1 requests a token for its pod's service account: %v", err)
	}
	forbidden(t, "n1 requests a token for another service account", token("unused"), "no relationship found")

	// Volumes: the claim its pod mounts and the volume bound to that claim.
	must(cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim1"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{}))
	for _, pv := range []string{"pv1", "pv-other"} {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + pv}}}}
		if pv == "pv1" {
			v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "claim1"}
		}
		must(cs.CoreV1().PersistentVolumes().Create(ctx, v, metav1.CreateOptions{}))
	}
	p3 := pod("p3", "n1", "s3", "")
	p3.Spec.Volumes = append(p3.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim1"}}})
	must(cs.CoreV1().Pods(ns).Create(ctx, p3, metav1.CreateOptions{}))
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if _, err := n1.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "claim1", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := n1.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{})
		return err
	})
	_, err = n1.CoreV1().PersistentVolumes().Get(ctx, "pv-other", metav1.GetOptions{})
	forbidden(t, "n1 reads an unrelated volume", err, "no relationship found")

	// Access reviews answer as the requests were answered.
	review := func(name string) *authorizationv1.SubjectAccessReview {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets", Namespace: ns, Name: name},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := review("s1"); !r.Status.Allowed {
		t.Fatalf("SubjectAccessReview of n1 reading s1: %+v", r.Status)
	}
	if r := review("s2"); r.Status.Allowed || !strings.Contains(r.Status.Reason, "node: no relationship found") {
		t.Fatalf("SubjectAccessReview of n1 reading s2: %+v", r.Status)
	}

	// kubectl auth can-i, impersonating the node (SelfSubjectAccessReview).
	bin, err := servertest.FindKubectl("1.33")
	if err != nil {
		t.Fatal(err)
	}
	canI := func(secret string) string {
		out, _, _ := servertest.RunKubectl(bin, t.TempDir(), srv.Kubeconfig, "", "auth", "can-i", "get", "secrets/"+secret, "-n", ns,
			"--as", "system:node:n1", "--as-group", "system:nodes", "--as-group", "system:authenticated")
		return strings.TrimSpace(out)
	}
	if got := canI("s1"); got != "yes" {
		t.Fatalf("kubectl auth can-i get secrets/s1 as n1: %q, want yes", got)
	}
	// kubectl prints the review's reason after "no - ".
	if got := canI("s2"); got != "no - node: no relationship found between node 'n1' and this object" {
		t.Fatalf("kubectl auth can-i get secrets/s2 as n1: %q, want no with the Node authorizer's reason", got)
	}

	// Without its pod, the node loses the pod's secret.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		_, err := n1.CoreV1().Secrets(ns).Get(ctx, "s1", metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("n1 reads s1 after its pod was deleted: %v", err)
	})
}
