package v1alpha1

import "kubeos.dev/kube/pkg/lifecycle"

// DependencyRef names a kubeos.dev object another one depends on (spec.dependsOn): the engine
// waits until it is Active before provisioning the dependent and refuses to tear it down while
// the dependent exists.
type DependencyRef struct {
	// Kind is a kubeos.dev kind ("Database", "Tenant").
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Namespace of a namespaced kind; empty is the dependent's own namespace. Ignored for
	// cluster-scoped kinds.
	Namespace string `json:"namespace,omitempty"`
}

// Dependent is implemented by every kubeos.dev kind: the refs of its spec.dependsOn.
// +kubebuilder:object:generate=false
type Dependent interface {
	lifecycle.Object
	GetDependsOn() []DependencyRef
}

// Deletion policies of the data kinds.
const (
	// DeletionRetain keeps the data when the object goes; login is revoked (the default).
	DeletionRetain = "Retain"
	// DeletionDelete removes the data with the object.
	DeletionDelete = "Delete"
	// DeletionDeleteIfEmpty removes a Bucket only when it holds no objects.
	DeletionDeleteIfEmpty = "DeleteIfEmpty"
)

// PasswordFrom takes a data kind's password from a Credential of type password in the same
// namespace (key "password" of its Secret) instead of a generated one; when the Credential
// rotates, the server-side password and the connection Secret follow.
type PasswordFrom struct {
	Credential string `json:"credential"`
}

// RestoreFrom creates a data object from an archive of a Backup in the same namespace.
type RestoreFrom struct {
	Backup string `json:"backup"`
	// Archive names one archive of the Backup (status.history[].archive); empty is its last
	// successful one.
	Archive string `json:"archive,omitempty"`
}

// DataStatus is what every data kind reports beside the lifecycle status.
type DataStatus struct {
	// Server is the server entry (a kubeos.dev/server Secret in kube-system) in use.
	Server string `json:"server,omitempty"`
	// ConnectionSecret is the Secret with the connection (<object>-<kind>).
	ConnectionSecret string `json:"connectionSecret,omitempty"`
}

// SecretTypeConnection is the type of the connection Secrets the data kinds write.
const SecretTypeConnection = "kubeos.dev/connection"

// ConnectionSecretName is the connection Secret of an object of kind ("orders-database").
func ConnectionSecretName(name, kind string) string {
	return name + "-" + lower(kind)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// GetDependsOn implements Dependent.
func (o *Tenant) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }

// GetDependsOn implements Dependent.
func (o *Quota) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }

// GetDependsOn implements Dependent.
func (o *AccessPolicy) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }

// GetDependsOn implements Dependent.
func (o *SecretPolicy) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }

// GetDependsOn implements Dependent.
func (o *Credential) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }

// GetDependsOn implements Dependent.
func (o *Certificate) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
