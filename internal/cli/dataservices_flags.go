package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addDataServicesFlags adds the `kube server` flags of the embedded data servers.
func addDataServicesFlags(f *pflag.FlagSet, o *server.DataServicesOptions) {
	f.BoolVar(&o.EmbeddedNATS, "embedded-nats", true, "run NATS JetStream in-process (store in <data-dir>/nats) and register it as the server entry kube-system/nats-embedded, the default nats server unless another is")
	f.IntVar(&o.EmbeddedNATSPort, "embedded-nats-port", 0, "loopback client port of the embedded NATS server (0: a free port at every start)")
	f.BoolVar(&o.EmbeddedS3, "embedded-s3", true, "run the versitygw S3 store (a child process of this binary, data in <data-dir>/s3) and register it as the server entry kube-system/s3-embedded, the default s3 server unless another is")
	f.IntVar(&o.EmbeddedS3Port, "embedded-s3-port", 0, "loopback port of the embedded S3 store (0: a free port at every start)")
}
