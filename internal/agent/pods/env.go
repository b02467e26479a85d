package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/api/v1/resource"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
	"k8s.io/utils/ptr"
)

// configError is a container whose configuration cannot be built (a missing ConfigMap key):
// waiting reason CreateContainerConfigError.
type configError struct{ msg string }

func (e configError) Error() string { return e.msg }

// envVars resolves c's environment as the kubelet does: envFrom first, then env in order,
// each value expanded with $(VAR) over what came before.
func (m *Manager) envVars(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([][2]string, error) {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	cms := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	getCM := func(name string) (*corev1.ConfigMap, error) {
		if cm, ok := cms[name]; ok {
			return cm, nil
		}
		cm, err := m.opts.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		cms[name] = cm
		return cm, nil
	}
	getSecret := func(name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := m.opts.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		secrets[name] = s
		return s, nil
	}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := getCM(ef.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptr.Deref(ef.ConfigMapRef.Optional, false) {
					continue
				}
				return nil, configError{fmt.Sprintf("configmap %q not found", ef.ConfigMapRef.Name)}
			}
			for k, v := range cm.Data {
				set(ef.Prefix+k, v)
			}
		case ef.SecretRef != nil:
			s, err := getSecret(ef.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptr.Deref(ef.SecretRef.Optional, false) {
					continue
				}
				return nil, configError{fmt.Sprintf("secret %q not found", ef.SecretRef.Name)}
			}
			for k, v := range s.Data {
				set(ef.Prefix+k, string(v))
			}
		}
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom == nil {
			value = expansion.Expand(value, expansion.MappingFuncFor(vals))
			set(e.Name, value)
			continue
		}
		vf := e.ValueFrom
		switch {
		case vf.FieldRef != nil:
			switch vf.FieldRef.FieldPath {
			case "status.podIP", "status.podIPs":
				value = podIP
			case "status.hostIP", "status.hostIPs":
				value = hostIP
			case "spec.nodeName":
				value = m.opts.NodeName
			default:
				v, err := fieldpath.ExtractFieldPathAsString(pod, vf.FieldRef.FieldPath)
				if err != nil {
					return nil, configError{err.Error()}
				}
				value = v
			}
		case vf.ResourceFieldRef != nil:
			v, err := resource.ExtractResourceValueByContainerNameAndNodeAllocatable(vf.ResourceFieldRef, pod, c.Name, m.opts.Allocatable())
			if err != nil {
				return nil, configError{err.Error()}
			}
			value = v
		case vf.ConfigMapKeyRef != nil:
			ref := vf.ConfigMapKeyRef
			cm, err := getCM(ref.Name)
			v, ok := "", false
			if err == nil {
				v, ok = cm.Data[ref.Key]
			}
			if !ok {
				if ptr.Deref(ref.Optional, false) {
					continue
				}
				if err != nil {
					return nil, configError{fmt.Sprintf("configmap %q not found", ref.Name)}
				}
				return nil, configError{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)}
			}
			value = v
		case vf.SecretKeyRef != nil:
			ref := vf.SecretKeyRef
			s, err := getSecret(ref.Name)
			var b []byte
			ok := false
			if err == nil {
				b, ok = s.Data[ref.Key]
			}
			if !ok {
				if ptr.Deref(ref.Optional, false) {
					continue
				}
				if err != nil {
					return nil, configError{fmt.Sprintf("secret %q not found", ref.Name)}
				}
				return nil, configError{fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)}
			}
			value = string(b)
		}
		set(e.Name, value)
	}
	out := make([][2]string, 0, len(order))
	for _, k := range order {
		out = append(out, [2]string{k, vals[k]})
	}
	return out, nil
}

// expandArgs expands $(VAR) in command and args with env. Pure.
func expandArgs(in []string, env [][2]string) []string {
	if len(in) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, kv := range env {
		m[kv[0]] = kv[1]
	}
	f := expansion.MappingFuncFor(m)
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expansion.Expand(s, f)
	}
	return out
}
