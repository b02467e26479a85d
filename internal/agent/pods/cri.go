package pods

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// podLogDir is the kubelet's per-pod log directory name, <ns>_<name>_<uid>.
func (m *Manager) podLogDir(pod *corev1.Pod) string {
	return filepath.Join(m.opts.LogDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// containerLogPath is relative to the sandbox's log directory: <container>/<attempt>.log.
func containerLogPath(name string, attempt uint32) string {
	return filepath.Join(name, strconv.FormatUint(uint64(attempt), 10)+".log")
}

// sandboxConfig is the CRI sandbox of pod. attempt counts sandboxes made for it.
func (m *Manager) sandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.HostNetwork {
		hostname = ""
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname:     hostname,
		LogDirectory: m.podLogDir(pod),
		DnsConfig:    m.dnsConfig(pod),
		Labels:       map[string]string{labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID)},
		Annotations:  map[string]string{},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
			},
		},
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case corev1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case corev1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	if m.opts.Cgroups != nil {
		cfg.Linux.CgroupParent = m.opts.Cgroups.PodParent(pod)
	}
	for _, s := range ptr.Deref(pod.Spec.SecurityContext, corev1.PodSecurityContext{}).Sysctls {
		if cfg.Linux.Sysctls == nil {
			cfg.Linux.Sysctls = map[string]string{}
		}
		cfg.Linux.Sysctls[s.Name] = s.Value
	}
	return cfg
}

func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if ptr.Deref(pod.Spec.ShareProcessNamespace, false) {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// dnsConfig is the pod's resolv.conf as the kubelet writes it for its dnsPolicy: the
// cluster DNS servers and search path for ClusterFirst (when the agent has --cluster-dns),
// the node's resolv.conf otherwise, and the pod's own dnsConfig on top.
func (m *Manager) dnsConfig(pod *corev1.Pod) *runtimeapi.DNSConfig {
	cfg := &runtimeapi.DNSConfig{}
	policy := pod.Spec.DNSPolicy
	if policy == corev1.DNSClusterFirstWithHostNet {
		policy = corev1.DNSClusterFirst
	} else if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	switch {
	case policy == corev1.DNSClusterFirst && len(m.opts.ClusterDNS) > 0:
		d := m.opts.ClusterDomain
		cfg.Servers = append(cfg.Servers, m.opts.ClusterDNS...)
		cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		cfg.Options = []string{"ndots:5"}
	case policy == corev1.DNSNone:
	default:
		cfg.Servers, cfg.Searches, cfg.Options = m.opts.HostDNS()
	}
	if pc := pod.Spec.DNSConfig; pc != nil {
		cfg.Servers = append(cfg.Servers, pc.Nameservers...)
		cfg.Searches = append(cfg.Searches, pc.Searches...)
		for _, o := range pc.Options {
			if o.Value != nil {
				cfg.Options = append(cfg.Options, o.Name+":"+*o.Value)
			} else {
				cfg.Options = append(cfg.Options, o.Name)
			}
		}
	}
	return cfg
}

// ParseResolvConf reads nameserver, search and options lines. Pure.
func ParseResolvConf(s string) (servers, searches, options []string) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "nameserver":
			servers = append(servers, f[1])
		case "search":
			searches = f[1:]
		case "options":
			options = append(options, f[1:]...)
		}
	}
	return servers, searches, options
}

// Resources is the cgroup side of c's requests and limits as the kubelet computes them for
// cgroup v1 and v2 through CRI: cpu.shares from the CPU request (limit when no request;
// min 2), CFS quota from the CPU limit over a 100 ms period (min 1 ms), the memory limit.
// Pure.
func Resources(c *corev1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	req, lim := c.Resources.Requests, c.Resources.Limits
	cpuReq, hasReq := req[corev1.ResourceCPU]
	cpuLim, hasLim := lim[corev1.ResourceCPU]
	milli := int64(0)
	if hasReq {
		milli = cpuReq.MilliValue()
	} else if hasLim {
		milli = cpuLim.MilliValue()
	}
	shares := milli * 1024 / 1000
	shares = max(shares, 2)
	shares = min(shares, 262144)
	r.CpuShares = shares
	if hasLim && cpuLim.MilliValue() > 0 {
		const period = 100000
		quota := cpuLim.MilliValue() * period / 1000
		r.CpuPeriod, r.CpuQuota = period, max(quota, 1000)
	}
	if mem, ok := lim[corev1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = mem.Value()
	}
	return r
}

// containerConfig is the CRI container c of pod, attempt its restart count.
func (m *Manager) containerConfig(pod *corev1.Pod, c *corev1.Container, attempt uint32, image string, env [][2]string, volumes map[string]string, init bool) (*runtimeapi.ContainerConfig, error) {
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:    expandArgs(c.Command, env),
		Args:       expandArgs(c.Args, env),
		WorkingDir: c.WorkingDir,
		Labels: map[string]string{labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID),
			labelContainer: c.Name, labelInit: strconv.FormatBool(init)},
		Annotations: map[string]string{annotationGrace: strconv.FormatInt(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30), 10)},
		LogPath:     containerLogPath(c.Name, attempt),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       Resources(c),
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)},
		},
	}
	for _, kv := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: kv[0], Value: []byte(kv[1])})
	}
	sc := cfg.Linux.SecurityContext
	psc := ptr.Deref(pod.Spec.SecurityContext, corev1.PodSecurityContext{})
	if psc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	sc.SupplementalGroups = psc.SupplementalGroups
	if s := c.SecurityContext; s != nil {
		sc.Privileged = ptr.Deref(s.Privileged, false)
		sc.ReadonlyRootfs = ptr.Deref(s.ReadOnlyRootFilesystem, false)
		if s.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *s.RunAsUser}
		}
		if s.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *s.RunAsGroup}
		}
		if s.Capabilities != nil {
			caps := &runtimeapi.Capability{}
			for _, a := range s.Capabilities.Add {
				caps.AddCapabilities = append(caps.AddCapabilities, string(a))
			}
			for _, d := range s.Capabilities.Drop {
				caps.DropCapabilities = append(caps.DropCapabilities, string(d))
			}
			sc.Capabilities = caps
		}
	}
	for _, vm := range c.VolumeMounts {
		host, ok := volumes[vm.Name]
		if !ok {
			return nil, configError{fmt.Sprintf("volume mount %q names no volume of the pod", vm.Name)}
		}
		if vm.SubPath != "" {
			host = filepath.Join(host, filepath.Clean("/"+vm.SubPath))
		}
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly})
	}
	if c.TerminationMessagePath != "" {
		// The kubelet mounts a file for the termination message; the agent keeps it with
		// the pod's volumes.
		dir := filepath.Join(m.opts.RootDir, "pods", string(pod.UID), "containers", c.Name)
		f := filepath.Join(dir, strconv.FormatUint(uint64(attempt), 10))
		if err := touch(dir, f); err == nil {
			cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: f})
		}
	}
	return cfg, nil
}
