package pods

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
)

// hookClient makes lifecycle hooks' HTTP requests: no proxy (a pod address never goes
// through one), certificates not verified (as upstream's probes), redirects not followed
// beyond the default ten.
var hookClient = &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}

// runHook runs a lifecycle handler of container c (runtime id) with upstream's semantics:
// exec fails on a non-zero exit, httpGet only when no answer comes (any status code
// succeeds; an HTTPS hook answered in plain HTTP is retried in HTTP), sleep waits its
// seconds unless ctx ends first. ctx bounds the hook (the grace budget of a preStop).
func (m *Manager) runHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		timeout := time.Duration(0)
		if d, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(d), time.Second)
		}
		stdout, stderr, err := m.opts.Runtime.ExecSync(ctx, id, h.Exec.Command, timeout)
		if err != nil {
			out := strings.TrimSpace(string(stdout) + string(stderr))
			return fmt.Errorf("exec lifecycle hook (%v) for container %q in pod %s/%s failed: %w, message: %q", h.Exec.Command, c.Name, pod.Namespace, pod.Name, err, out)
		}
		return nil
	case h.HTTPGet != nil:
		req, err := httpprobe.NewRequestForHTTPGetAction(h.HTTPGet, c, podIP, "lifecycle")
		if err != nil {
			return fmt.Errorf("http lifecycle hook (%s) for container %q: %w", h.HTTPGet.Path, c.Name, err)
		}
		req = req.WithContext(ctx)
		resp, err := hookClient.Do(req)
		if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			req = req.Clone(ctx)
			req.URL.Scheme = "http"
			req.Header.Del("Authorization")
			resp, err = hookClient.Do(req)
		}
		if err != nil {
			return fmt.Errorf("http lifecycle hook (%s) for container %q in pod %s/%s failed: %w", h.HTTPGet.Path, c.Name, pod.Namespace, pod.Name, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		resp.Body.Close()
		return nil
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("sleep lifecycle hook (%d) for container %q: container terminated before the sleep finished", h.Sleep.Seconds, c.Name)
		case <-t.C:
			return nil
		}
	}
	return errors.New("lifecycle hook has no handler")
}

// podIP is the pod's address for httpGet hooks whose host is empty: the sandbox's network
// status, the node's address for host-network pods.
func (m *Manager) podIP(ctx context.Context, pod *corev1.Pod, sandboxID string) string {
	if pod.Spec.HostNetwork {
		return m.opts.HostIP()
	}
	st, err := m.opts.Runtime.PodSandboxStatus(ctx, sandboxID, false)
	if err != nil {
		return ""
	}
	return st.GetStatus().GetNetwork().GetIp()
}
