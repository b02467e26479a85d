package cli

import (
	"github.com/spf13/pflag"

	"kubeos.dev/kube/internal/server"
)

// addAdmissionAuditFlags are kube-apiserver's flags for the audit log, encryption at rest
// and the admission webhook client certificate.
func addAdmissionAuditFlags(f *pflag.FlagSet, o *server.AdmissionAuditOptions) {
	f.StringVar(&o.AuditPolicyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy that decides what the audit log records (empty: no audit)")
	f.StringVar(&o.AuditLogPath, "audit-log-path", "", "file the audit events go to as JSON lines (\"-\": standard output)")
	f.IntVar(&o.AuditLogMaxSize, "audit-log-maxsize", 100, "size in megabytes at which the audit log is rotated")
	f.IntVar(&o.AuditLogMaxBackup, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: all)")
	f.IntVar(&o.AuditLogMaxAge, "audit-log-maxage", 0, "days to keep rotated audit log files (0: no limit)")
	f.StringVar(&o.EncryptionProviderConfig, "encryption-provider-config", "", "apiserver.config.k8s.io/v1 EncryptionConfiguration: how resources are encrypted in etcd")
	f.StringVar(&o.AdmissionClientCertFile, "admission-client-cert", "", "client certificate presented to admission webhooks (mutual TLS)")
	f.StringVar(&o.AdmissionClientKeyFile, "admission-client-key", "", "key of --admission-client-cert")
}
