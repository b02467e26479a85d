package platform

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// VolumeFiles reaches the files of Volumes for Backups (issue 20: "a Backup's source may
// now be a Volume: a tar of the files into the Bucket, restored into a new Volume"): the
// node agent holding a local-path PersistentVolume serves them as a gzipped tar at
// /volumes/<pv>/archive (GET reads, PUT unpacks into the directory), reached through the
// API server's nodes/<node>/proxy as the server reaches an agent for pods/log. Only
// volumes of the local-path provisioner qualify; a perReplica Volume has no one claim and
// is refused.
type VolumeFiles struct {
	// Reader reads Volumes' claims and PersistentVolumes.
	Reader client.Reader
	// Nodes is a REST client of the core API group (kubernetes.Interface's
	// CoreV1().RESTClient()) whose identity may get and update nodes/proxy.
	Nodes rest.Interface
}

// ErrVolumeNotBound is returned for a Volume whose claim has no PersistentVolume yet (a
// WaitForFirstConsumer claim no pod has used): it has no files.
var ErrVolumeNotBound = errors.New("volume is not bound to a persistent volume yet")

// VolumeArchive is a gzipped tar of vol's files; the caller closes it.
func (f VolumeFiles) VolumeArchive(ctx context.Context, vol *v1alpha1.Volume) (io.ReadCloser, error) {
	node, pv, err := f.locate(ctx, vol)
	if err != nil {
		return nil, err
	}
	rc, err := f.Nodes.Get().AbsPath("/api/v1/nodes", node, "proxy", "volumes", pv, "archive").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("volume %s/%s: archive from node %s: %w", vol.Namespace, vol.Name, node, err)
	}
	return rc, nil
}

// RestoreVolume unpacks a gzipped tar (VolumeArchive's) into vol's directory; files of the
// same names are replaced, others stay.
func (f VolumeFiles) RestoreVolume(ctx context.Context, vol *v1alpha1.Volume, r io.Reader) error {
	node, pv, err := f.locate(ctx, vol)
	if err != nil {
		return err
	}
	if err := f.Nodes.Put().AbsPath("/api/v1/nodes", node, "proxy", "volumes", pv, "archive").
		SetHeader("Content-Type", "application/gzip").Body(r).Do(ctx).Error(); err != nil {
		return fmt.Errorf("volume %s/%s: restore on node %s: %w", vol.Namespace, vol.Name, node, err)
	}
	return nil
}

// locate finds the node and PersistentVolume holding vol's files.
func (f VolumeFiles) locate(ctx context.Context, vol *v1alpha1.Volume) (node, pv string, err error) {
	if vol.Spec.PerReplica {
		return "", "", fmt.Errorf("volume %s/%s is perReplica: each replica has its own claim", vol.Namespace, vol.Name)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := f.Reader.Get(ctx, client.ObjectKey{Namespace: vol.Namespace, Name: VolumeClaimName(vol.Name)}, &pvc); err != nil {
		return "", "", fmt.Errorf("volume %s/%s: claim: %w", vol.Namespace, vol.Name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", "", fmt.Errorf("volume %s/%s: %w", vol.Namespace, vol.Name, ErrVolumeNotBound)
	}
	var p corev1.PersistentVolume
	if err := f.Reader.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &p); err != nil {
		return "", "", fmt.Errorf("volume %s/%s: persistentvolume %s: %w", vol.Namespace, vol.Name, pvc.Spec.VolumeName, err)
	}
	return volumeFilesNode(&p, vol)
}

// volumeFilesNode is the node serving p's files; only local-path volumes qualify. Pure.
func volumeFilesNode(p *corev1.PersistentVolume, vol *v1alpha1.Volume) (string, string, error) {
	if p.Annotations["pv.kubernetes.io/provisioned-by"] != "kubeos.dev/local-path" {
		return "", "", fmt.Errorf("volume %s/%s: persistentvolume %s is not a local-path volume: its files cannot be reached", vol.Namespace, vol.Name, p.Name)
	}
	node := PersistentVolumeNode(p)
	if node == "" {
		return "", "", fmt.Errorf("volume %s/%s: persistentvolume %s names no node", vol.Namespace, vol.Name, p.Name)
	}
	return node, p.Name, nil
}
