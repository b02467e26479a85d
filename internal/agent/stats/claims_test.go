package stats

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestClaimDirs(t *testing.T) {
	claim := func(name, claimName string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{claim("data", "www-web-0"), claim("logs", "logs"), claim("expr", "expr"), claim("unmounted", "u"),
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		InitContainers: []corev1.Container{{Name: "init", VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", SubPath: "a/b"}}}},
		Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/usr/share/www"}, {Name: "scratch", MountPath: "/tmp"},
			{Name: "expr", MountPath: "/e", SubPathExpr: "$(POD)"}}}},
	}}
	mounts := map[string][]*runtimeapi.Mount{
		"app": {{ContainerPath: "/tmp", HostPath: "/agent/kubelet/pods/u1/volumes/scratch"},
			{ContainerPath: "/usr/share/www", HostPath: "/agent/volumes/pvc-1/"},
			{ContainerPath: "/e", HostPath: "/agent/volumes/pvc-3/p"}},
		"init": {{ContainerPath: "/logs", HostPath: "/agent/volumes/pvc-2/a/b"}},
	}
	want := map[string]string{"data": "/agent/volumes/pvc-1", "logs": "/agent/volumes/pvc-2"}
	if got := claimDirs(pod, mounts); !maps.Equal(got, want) {
		t.Errorf("claimDirs = %v, want %v", got, want)
	}
	// A subPath the host path does not end with (not the agent's mount): no directory.
	mounts["init"][0].HostPath = "/elsewhere"
	if got := claimDirs(pod, mounts); got["logs"] != "" {
		t.Errorf("claimDirs with a foreign subPath mount = %v", got)
	}
}

// TestClaimUsageReused: a claim directory's du is reused for claimStatsPeriod, then
// measured again.
func TestClaimUsageReused(t *testing.T) {
	p := NewProvider(Options{})
	dir := t.TempDir()
	now := time.Now()
	before, _ := p.claimUsage(dir, now)
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.claimUsage(dir, now.Add(claimStatsPeriod-time.Second)); got != before {
		t.Errorf("within the period: %d bytes, want the first du's %d", got, before)
	}
	if got, inodes := p.claimUsage(dir, now.Add(claimStatsPeriod)); got < before+1<<20 || inodes < 2 {
		t.Errorf("after the period: %d bytes %d inodes, want the 1 MiB file counted", got, inodes)
	}
	p.forgetClaimsBefore(now.Add(claimStatsPeriod + time.Second))
	if len(p.claimDu) != 0 {
		t.Errorf("forgetClaimsBefore kept %v", p.claimDu)
	}
}
