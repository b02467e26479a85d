package stats

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// claimVolumes measures pod's persistentVolumeClaim volumes as the kubelet reports them:
// one VolumeStats per volume, named as in the pod's spec, with pvcRef {claim, namespace}.
// A claim's directory (a local PV's path, for the local-path provisioner's
// <agent data dir>/volumes/<pv>) is found in the mounts the runtime gives the pod's running
// containers, so a claim no running container mounts is not reported. Capacity,
// available bytes and inodes are its filesystem's (statfs, as the kubelet's local volume
// plugin); used bytes and inodes are the directory's own (du), since a local-path volume
// shares its filesystem with everything else on the node and statfs's used figure would
// be the whole disk's. The du is reused for claimStatsPeriod.
func (p *Provider) claimVolumes(ctx context.Context, pod *corev1.Pod, containers []*runtimeapi.Container, t metav1.Time) []statsapi.VolumeStats {
	if pod == nil || !hasClaims(pod) {
		return nil
	}
	mounts := map[string][]*runtimeapi.Mount{}
	for _, c := range containers {
		name := c.GetLabels()[labelContainer]
		if name == "" {
			name = c.GetMetadata().GetName()
		}
		mounts[name] = p.containerMounts(ctx, c.Id)
	}
	dirs := claimDirs(pod, mounts)
	var out []statsapi.VolumeStats
	for _, v := range pod.Spec.Volumes {
		dir, ok := dirs[v.Name]
		if !ok || v.PersistentVolumeClaim == nil {
			continue
		}
		fs, err := statFs(dir, t)
		if err != nil {
			continue
		}
		used, inodes := p.claimUsage(dir, t.Time)
		fs.UsedBytes, fs.InodesUsed = &used, &inodes
		out = append(out, statsapi.VolumeStats{Name: v.Name, FsStats: *fs,
			PVCRef: &statsapi.PVCReference{Name: v.PersistentVolumeClaim.ClaimName, Namespace: pod.Namespace}})
	}
	return out
}

// claimStatsPeriod is how long a claim directory's du is reused, the kubelet's default
// volumeStatsAggPeriod: a Summary is made every 10 s for eviction, which does not need
// claims, and a claim may hold a database's many files.
const claimStatsPeriod = time.Minute

// duUsage is one du of a directory.
type duUsage struct {
	bytes, inodes uint64
	at            time.Time
}

// claimUsage is dir's du, measured again once the last one is claimStatsPeriod old.
func (p *Provider) claimUsage(dir string, now time.Time) (bytes, inodes uint64) {
	p.mu.Lock()
	u, ok := p.claimDu[dir]
	p.mu.Unlock()
	if ok && now.Sub(u.at) < claimStatsPeriod {
		return u.bytes, u.inodes
	}
	bytes, inodes = du(dir)
	p.mu.Lock()
	p.claimDu[dir] = duUsage{bytes: bytes, inodes: inodes, at: now}
	p.mu.Unlock()
	return bytes, inodes
}

// forgetClaimsBefore drops the du of directories not measured since t (no pod mounts them).
// Callers hold p.mu.
func (p *Provider) forgetClaimsBefore(t time.Time) {
	for dir, u := range p.claimDu {
		if u.at.Before(t) {
			delete(p.claimDu, dir)
		}
	}
}

func hasClaims(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

// containerMounts are the runtime's mounts of container id (CRI ContainerStatus), kept
// while it runs: a container's mounts never change.
func (p *Provider) containerMounts(ctx context.Context, id string) []*runtimeapi.Mount {
	p.mu.Lock()
	m, ok := p.mounts[id]
	p.mu.Unlock()
	if ok {
		return m
	}
	st, err := p.opts.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil
	}
	m = st.GetStatus().GetMounts()
	p.mu.Lock()
	p.mounts[id] = m
	p.mu.Unlock()
	return m
}

// claimDirs maps pod's persistentVolumeClaim volumes to their host directories, from the
// mounts of its containers by container name: the host path mounted at a volumeMount's
// mountPath, less the volumeMount's subPath (the agent mounts <dir>/<subPath>). Mounts
// with subPathExpr are not used (their expansion is the pod's). Pure.
func claimDirs(pod *corev1.Pod, mounts map[string][]*runtimeapi.Mount) map[string]string {
	claims := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = true
		}
	}
	dirs := map[string]string{}
	var specs []corev1.Container
	specs = append(append(specs, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range specs {
		for _, vm := range c.VolumeMounts {
			if !claims[vm.Name] || vm.SubPathExpr != "" || dirs[vm.Name] != "" {
				continue
			}
			for _, m := range mounts[c.Name] {
				if m.GetContainerPath() != vm.MountPath || m.GetHostPath() == "" {
					continue
				}
				host := filepath.Clean(m.GetHostPath())
				if vm.SubPath != "" {
					sub := filepath.Clean("/" + vm.SubPath)
					rest, ok := strings.CutSuffix(host, sub)
					if !ok || rest == "" {
						break
					}
					host = rest
				}
				dirs[vm.Name] = host
				break
			}
		}
	}
	return dirs
}
