package security

import (
	"strings"
	"testing"
)

// staticToken is in the server's --token-auth-file for user carol, groups devs and ops.
const staticToken = "s3cr3t-static-token-31337"

// TestStaticToken: kubectl with a token from --token-auth-file is that user with those
// groups; a token not in the file is 401.
func TestStaticToken(t *testing.T) {
	securitySuite.Need(t)
	k := kubectl{bin: findKubectl(t, "1.33"), home: t.TempDir()}
	bare := bareKubeconfig(t)
	out := k.ok(t, bare, "--token", staticToken, "auth", "whoami")
	for _, want := range []string{"carol", "carol-uid", "devs", "ops", "system:authenticated"} {
		if !strings.Contains(out, want) {
			t.Errorf("whoami with the static token lacks %q:\n%s", want, out)
		}
	}
	// carol holds no role: RBAC refuses her with upstream's message.
	k.fails(t, bare, `User "carol" cannot list resource "configmaps"`, "--token", staticToken, "get", "configmaps", "-n", "default")
	k.fails(t, bare, "You must be logged in to the server", "--token", "not-"+staticToken, "get", "configmaps", "-n", "default")
}
