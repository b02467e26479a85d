package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Database modes.
const (
	// DatabaseShared is a database and its owner role on a registered PostgreSQL server.
	DatabaseShared = "Shared"
	// DatabaseDedicated is a server of its own run by the workload layer (not yet offered).
	DatabaseDedicated = "Dedicated"
)

// ReservedDatabaseNames may not be claimed.
var ReservedDatabaseNames = []string{"postgres", "template0", "template1"}

// Database is a PostgreSQL database with an owner role on a registered server (spec.server, or
// the default postgresql entry), with its connection in the Secret <name>-database. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DatabaseSpec   `json:"spec"`
	Status            DatabaseStatus `json:"status,omitempty"`
}

// DatabaseGrant gives the owner role of another Database of the same tenant privileges on this
// one.
type DatabaseGrant struct {
	// Database names the Database whose role is granted.
	Database string `json:"database"`
	// Namespace of that Database (default this one's; must belong to the same tenant).
	Namespace string `json:"namespace,omitempty"`
	// Privileges are database privileges (CONNECT, TEMPORARY, CREATE) and table privileges
	// on every table of the database's schemas (SELECT, INSERT, UPDATE, DELETE, TRUNCATE,
	// REFERENCES, TRIGGER).
	Privileges []string `json:"privileges"`
}

// DatabaseSpec is what a team asks for.
type DatabaseSpec struct {
	// Server names a postgresql server entry; empty is the default one.
	Server string `json:"server,omitempty"`
	// DeletionPolicy is Retain (default: the database stays, its role loses login) or Delete.
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
	// PasswordFrom takes the role's password from a Credential.
	PasswordFrom *PasswordFrom `json:"passwordFrom,omitempty"`
	// DatabaseName on the server (immutable; default <namespace>_<name> with "-" as "_").
	DatabaseName string `json:"databaseName,omitempty"`
	// Extensions to CREATE EXTENSION IF NOT EXISTS.
	Extensions []string `json:"extensions,omitempty"`
	// Schemas to create, owned by the role.
	Schemas []string `json:"schemas,omitempty"`
	// ConnectionLimit of the role (default unlimited).
	ConnectionLimit *int32 `json:"connectionLimit,omitempty"`
	// Grants to other Databases' roles of the same tenant.
	Grants []DatabaseGrant `json:"grants,omitempty"`
	// RestoreFrom creates the database from a Backup's archive.
	RestoreFrom *RestoreFrom `json:"restoreFrom,omitempty"`

	// Mode is Shared (default) or Dedicated (refused for now). The fields below are for the
	// dedicated mode.
	Mode        string             `json:"mode,omitempty"`
	Engine      string             `json:"engine,omitempty"`
	Version     string             `json:"version,omitempty"`
	Replicas    *int32             `json:"replicas,omitempty"`
	StorageSize *resource.Quantity `json:"storageSize,omitempty"`
}

// DatabaseStatus shows what was provisioned.
type DatabaseStatus struct {
	lifecycle.Status `json:",inline"`
	DataStatus       `json:",inline"`
	// DatabaseName and Role on the server.
	DatabaseName string `json:"databaseName,omitempty"`
	Role         string `json:"role,omitempty"`
	// ObservedSizeBytes is pg_database_size at the last observe.
	ObservedSizeBytes int64 `json:"observedSizeBytes,omitempty"`
}

// DatabaseList is a list of Databases.
// +kubebuilder:object:root=true
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

// LifecycleStatus implements lifecycle.Object.
func (o *Database) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// GetDependsOn implements Dependent.
func (o *Database) GetDependsOn() []DependencyRef { return o.Spec.DependsOn }
