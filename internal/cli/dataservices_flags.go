package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addDataServicesFlags adds the `kube server` flags of the embedded data servers.
func addDataServicesFlags(f *pflag.FlagSet, o *server.DataServicesOptions) {
}
