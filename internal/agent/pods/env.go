package pods

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/api/v1/resource"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/pkg/kubelet/envvars"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
	"k8s.io/utils/ptr"
)

// configError is a container whose configuration cannot be built (a missing ConfigMap key):
// waiting reason CreateContainerConfigError.
type configError struct{ msg string }

func (e configError) Error() string { return e.msg }

// serviceEnv is the kubelet's service environment of a pod in namespace ns
// (getServiceEnvVarMap): the variables of default/kubernetes always (KUBERNETES_SERVICE_HOST
// and _PORT, which client-go's in-cluster configuration reads), and with enableServiceLinks
// those of every Service of ns with a cluster IP, as upstream's envvars.FromServices names
// them.
func (m *Manager) serviceEnv(ns string, enableServiceLinks bool) map[string]string {
	out := map[string]string{}
	if m.services == nil {
		return out
	}
	byName := map[string]*corev1.Service{}
	for _, o := range m.services.GetStore().List() {
		svc, ok := o.(*corev1.Service)
		if !ok || !v1helper.IsServiceIPSet(svc) {
			continue
		}
		switch {
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes":
			if _, ok := byName[svc.Name]; !ok {
				byName[svc.Name] = svc
			}
		case svc.Namespace == ns && enableServiceLinks:
			byName[svc.Name] = svc
		}
	}
	list := make([]*corev1.Service, 0, len(byName))
	for _, svc := range byName {
		list = append(list, svc)
	}
	for _, e := range envvars.FromServices(list) {
		out[e.Name] = e.Value
	}
	return out
}

// envVars resolves c's environment as the kubelet does: envFrom first, then env in order,
// each value expanded with $(VAR) over what came before and the service variables; then
// the service variables the container does not set itself (serviceEnv).
func (m *Manager) envVars(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([][2]string, error) {
	var order []string
	vals := map[string]string{}
	svcEnv := m.serviceEnv(pod.Namespace, ptr.Deref(pod.Spec.EnableServiceLinks, corev1.DefaultEnableServiceLinks))
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
			value = expansion.Expand(value, expansion.MappingFuncFor(vals, svcEnv))
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
	out := make([][2]string, 0, len(order)+len(svcEnv))
	for _, k := range order {
		out = append(out, [2]string{k, vals[k]})
	}
	var extra []string
	for k := range svcEnv {
		if _, ok := vals[k]; !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		out = append(out, [2]string{k, svcEnv[k]})
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
