package lifecycle

import (
	"testing"
	"time"

	"kubeos.dev/kube/pkg/apis/kubeos/v1alpha1"
)

// TestUsesCycle: a Component uses a Volume (so the Volume must be Active first); a Volume
// that would depend on that Component closes a cycle and is refused with its path, whichever
// of the two is written first; nothing of the refused object is stored.
func TestUsesCycle(t *testing.T) {
	componentSuite.Need(t)
	componentApply(t, `apiVersion: kubeos.dev/v1alpha1
kind: Component
metadata: {name: cyc-web}
spec:
  image: busybox
  uses: [{kind: Volume, name: cyc-files, mountPath: /data}]
`)
	waitComponent(t, "cyc-web", time.Minute, "waiting for its Volume", func(c *v1alpha1.Component) bool {
		cond := componentCondition(c, "DependenciesReady")
		return cond != nil && cond.Status == "False"
	})
	refused(t, `apiVersion: kubeos.dev/v1alpha1
kind: Volume
metadata: {name: cyc-files}
spec:
  size: 1Gi
  dependsOn: [{kind: Component, name: cyc-web}]
`, "dependency cycle: Volume/"+acmeNS+"/cyc-files → Component/"+acmeNS+"/cyc-web → Volume/"+acmeNS+"/cyc-files")
	if _, _, err := alice(t, "", "-n", acmeNS, "get", "volume.kubeos.dev", "cyc-files"); err == nil {
		t.Fatal("the refused Volume exists")
	}
	if _, errOut, err := alice(t, "", "-n", acmeNS, "delete", "component.kubeos.dev", "cyc-web", "--wait=false"); err != nil {
		t.Fatalf("delete: %v: %s", err, errOut)
	}
}
