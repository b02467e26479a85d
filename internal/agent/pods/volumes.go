package pods

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/configmap"
	"k8s.io/kubernetes/pkg/volume/downwardapi"
	"k8s.io/kubernetes/pkg/volume/secret"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
	"k8s.io/utils/ptr"
)

// mountError is a volume that cannot be set up yet (a missing ConfigMap): the pod waits in
// ContainerCreating with a FailedMount event.
type mountError struct{ err error }

func (e mountError) Error() string { return e.err.Error() }

// volumeDir is where volume name of pod uid lives.
func (m *Manager) volumeDir(uid, name string) string {
	return filepath.Join(m.opts.RootDir, "pods", uid, "volumes", name)
}

// allocatableHost is the one VolumeHost method downwardapi.CollectData calls.
type allocatableHost struct {
	volume.VolumeHost
	allocatable corev1.ResourceList
}

func (h allocatableHost) GetNodeAllocatable() (corev1.ResourceList, error) { return h.allocatable, nil }

// prepareVolumes makes or refreshes every volume of pod and returns the host path of each.
// Token volumes are refreshed when tokens has no fresh token for them.
func (m *Manager) prepareVolumes(ctx context.Context, pod *corev1.Pod, tokens map[string]time.Time) (map[string]string, error) {
	paths := map[string]string{}
	uid := string(pod.UID)
	for _, v := range pod.Spec.Volumes {
		dir := m.volumeDir(uid, v.Name)
		var payload map[string]volumeutil.FileProjection
		var err error
		switch {
		case v.HostPath != nil:
			paths[v.Name] = v.HostPath.Path
			if t := v.HostPath.Type; t != nil && (*t == corev1.HostPathDirectoryOrCreate) {
				if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
					return nil, mountError{fmt.Errorf("hostPath %s: %w", v.HostPath.Path, err)}
				}
			} else if t != nil && *t != corev1.HostPathUnset {
				if _, err := os.Stat(v.HostPath.Path); err != nil {
					return nil, mountError{fmt.Errorf("hostPath type check failed: %s: %w", v.HostPath.Path, err)}
				}
			}
			continue
		case v.PersistentVolumeClaim != nil:
			if paths[v.Name], err = m.claimPath(ctx, pod, v); err != nil {
				return nil, err
			}
			continue
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, fmt.Errorf("emptyDir %s: %w", v.Name, err)
			}
			_ = os.Chmod(dir, 0o777)
			paths[v.Name] = dir
			continue
		case v.ConfigMap != nil:
			cm, gerr := m.opts.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			optional := ptr.Deref(v.ConfigMap.Optional, false)
			if gerr != nil {
				if !apierrors.IsNotFound(gerr) || !optional {
					return nil, mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : configmap %q not found", v.Name, v.ConfigMap.Name)}
				}
				cm = &corev1.ConfigMap{}
			}
			payload, err = configmap.MakePayload(v.ConfigMap.Items, cm, v.ConfigMap.DefaultMode, nil, optional)
		case v.Secret != nil:
			s, gerr := m.opts.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			optional := ptr.Deref(v.Secret.Optional, false)
			if gerr != nil {
				if !apierrors.IsNotFound(gerr) || !optional {
					return nil, mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : secret %q not found", v.Name, v.Secret.SecretName)}
				}
				s = &corev1.Secret{}
			}
			payload, err = secret.MakePayload(v.Secret.Items, s, v.Secret.DefaultMode, nil, optional)
		case v.DownwardAPI != nil:
			payload, err = downwardapi.CollectData(v.DownwardAPI.Items, pod, allocatableHost{allocatable: m.opts.Allocatable()}, ptr.To(ptr.Deref(v.DownwardAPI.DefaultMode, 0o644)), nil)
		case v.Projected != nil:
			payload, err = m.projected(ctx, pod, v, tokens)
		default:
			return nil, mountError{fmt.Errorf("volume %q: this volume type is not supported by kube agent", v.Name)}
		}
		if err != nil {
			if _, ok := err.(mountError); ok {
				return nil, err
			}
			return nil, mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		w, err := volumeutil.NewAtomicWriter(dir, pod.Namespace+"/"+pod.Name+"/"+v.Name)
		if err != nil {
			return nil, err
		}
		if err := w.Write(payload, nil); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		paths[v.Name] = dir
	}
	return paths, nil
}

// projected is a projected volume's payload: service-account tokens (bound to the pod,
// refreshed at 80% of their life), configMaps, secrets and downwardAPI items.
func (m *Manager) projected(ctx context.Context, pod *corev1.Pod, v corev1.Volume, tokens map[string]time.Time) (map[string]volumeutil.FileProjection, error) {
	out := map[string]volumeutil.FileProjection{}
	mode := ptr.Deref(v.Projected.DefaultMode, 0o644)
	for i, src := range v.Projected.Sources {
		var part map[string]volumeutil.FileProjection
		var err error
		switch {
		case src.ServiceAccountToken != nil:
			st := src.ServiceAccountToken
			key := v.Name + "/" + strconv.Itoa(i)
			exp := ptr.Deref(st.ExpirationSeconds, 3607)
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: &exp,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			}}
			if st.Audience != "" {
				req.Spec.Audiences = []string{st.Audience}
			}
			tr, terr := m.opts.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
			if terr != nil {
				return nil, fmt.Errorf("service account token: %w", terr)
			}
			life := time.Until(tr.Status.ExpirationTimestamp.Time)
			tokens[key] = time.Now().Add(life * 8 / 10)
			part = map[string]volumeutil.FileProjection{st.Path: {Data: []byte(tr.Status.Token), Mode: mode}}
		case src.ConfigMap != nil:
			cm, gerr := m.opts.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMap.Name, metav1.GetOptions{})
			optional := ptr.Deref(src.ConfigMap.Optional, false)
			if gerr != nil {
				if !apierrors.IsNotFound(gerr) || !optional {
					return nil, mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : configmap %q not found", v.Name, src.ConfigMap.Name)}
				}
				cm = &corev1.ConfigMap{}
			}
			part, err = configmap.MakePayload(src.ConfigMap.Items, cm, &mode, nil, optional)
		case src.Secret != nil:
			s, gerr := m.opts.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, src.Secret.Name, metav1.GetOptions{})
			optional := ptr.Deref(src.Secret.Optional, false)
			if gerr != nil {
				if !apierrors.IsNotFound(gerr) || !optional {
					return nil, mountError{fmt.Errorf("MountVolume.SetUp failed for volume %q : secret %q not found", v.Name, src.Secret.Name)}
				}
				s = &corev1.Secret{}
			}
			part, err = secret.MakePayload(src.Secret.Items, s, &mode, nil, optional)
		case src.DownwardAPI != nil:
			part, err = downwardapi.CollectData(src.DownwardAPI.Items, pod, allocatableHost{allocatable: m.opts.Allocatable()}, &mode, nil)
		default:
			return nil, fmt.Errorf("projected source %d of volume %q is not supported by kube agent", i, v.Name)
		}
		if err != nil {
			return nil, err
		}
		for k, f := range part {
			out[k] = f
		}
	}
	return out, nil
}

// tokensFresh reports whether no token in tokens is due for refresh at now.
func tokensFresh(tokens map[string]time.Time, now time.Time) bool {
	for _, due := range tokens {
		if !now.Before(due) {
			return false
		}
	}
	return true
}
