package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubeos.dev/kube/pkg/lifecycle"
)

// Group and Version of the platform kinds.
const (
	Group   = "kubeos.dev"
	Version = "v1alpha1"
)

// GroupVersion is kubeos.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Labels the platform puts on what it creates.
const (
	LabelTenant = "kubeos.dev/tenant"
	LabelEnv    = "kubeos.dev/env"
)

// Subject is a user or group a Tenant's admins or an AccessPolicy names.
type Subject struct {
	// Kind is User or Group.
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Tenant owns one namespace per environment (<tenant>-<env>), labelled kubeos.dev/tenant and
// kubeos.dev/env, with an admin RoleBinding for its admins in each. Cluster-scoped.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TenantSpec   `json:"spec"`
	Status            TenantStatus `json:"status,omitempty"`
}

// TenantSpec is what a tenant asks for.
type TenantSpec struct {
	// Environments are DNS labels (dev, staging, prod).
	Environments []string  `json:"environments"`
	Admins       []Subject `json:"admins,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// TenantStatus shows the namespaces provisioned.
type TenantStatus struct {
	lifecycle.Status `json:",inline"`
	Namespaces       []string `json:"namespaces,omitempty"`
}

// QuotaLimit caps the number of objects of one resource in a tenant's namespaces (or in one
// of them).
type QuotaLimit struct {
	// Resource is the plural resource, qualified by group unless core ("configmaps",
	// "deployments.apps").
	Resource string `json:"resource"`
	// Namespace restricts the limit to one namespace of the tenant (empty: all of them).
	Namespace string `json:"namespace,omitempty"`
	Max       int64  `json:"max"`
}

// QuotaUsage is the current count against one limit.
type QuotaUsage struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Used      int64  `json:"used"`
	Max       int64  `json:"max"`
}

// Quota limits object counts per kind in a tenant's namespaces; enforced at admission.
// Cluster-scoped.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
type Quota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              QuotaSpec   `json:"spec"`
	Status            QuotaStatus `json:"status,omitempty"`
}

// QuotaSpec names the tenant and the limits.
type QuotaSpec struct {
	Tenant string       `json:"tenant"`
	Limits []QuotaLimit `json:"limits"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// QuotaStatus shows usage.
type QuotaStatus struct {
	lifecycle.Status `json:",inline"`
	Usage            []QuotaUsage `json:"usage,omitempty"`
}

// AccessPolicy restricts subjects to some environments of a tenant: a request by one of the
// subjects into a namespace of the tenant whose environment is not allowed is refused (403)
// whatever RBAC says. Cluster-scoped.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
type AccessPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AccessPolicySpec   `json:"spec"`
	Status            AccessPolicyStatus `json:"status,omitempty"`
}

// AccessPolicySpec is the constraint.
type AccessPolicySpec struct {
	Tenant      string    `json:"tenant"`
	Subjects    []Subject `json:"subjects"`
	AllowedEnvs []string  `json:"allowedEnvs"`
	// Via, when set, admits the subjects' requests only when they come through one of
	// these: the user impersonating them, or a client whose user agent's product token
	// (what precedes the first "/", e.g. "kube-deploy" in "kube-deploy/1.2") is an entry.
	// Empty: any way.
	Via []string `json:"via,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// AccessPolicyStatus is the lifecycle status.
type AccessPolicyStatus struct {
	lifecycle.Status `json:",inline"`
}

// SecretPolicyRule allows Secrets matching SecretNames to be referenced by objects of Kinds.
type SecretPolicyRule struct {
	// SecretNames are names or prefixes ending in "*".
	SecretNames []string `json:"secretNames"`
	// Kinds are the kinds allowed to reference them ("Certificate", a custom resource's
	// kind; "*" for any).
	Kinds []string `json:"kinds"`
}

// SecretPolicy is a whitelist: once a namespace has one, an object there may reference a
// Secret only as some rule allows. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type SecretPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SecretPolicySpec   `json:"spec"`
	Status            SecretPolicyStatus `json:"status,omitempty"`
}

// SecretPolicySpec lists the rules.
type SecretPolicySpec struct {
	Rules []SecretPolicyRule `json:"rules"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// SecretPolicyStatus is the lifecycle status.
type SecretPolicyStatus struct {
	lifecycle.Status `json:",inline"`
}

// Credential generates a Secret (a random password, token or key pair) and rotates it every
// RotationPeriod. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Credential struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CredentialSpec   `json:"spec"`
	Status            CredentialStatus `json:"status,omitempty"`
}

// Credential types.
const (
	CredentialPassword = "password"
	CredentialToken    = "token"
	CredentialKeyPair  = "keypair"
)

// CredentialSpec is what to generate.
type CredentialSpec struct {
	// Type is password, token or keypair.
	Type string `json:"type"`
	// Length of a password or token (default 32).
	Length int `json:"length,omitempty"`
	// SecretName defaults to the Credential's name.
	SecretName string `json:"secretName,omitempty"`
	// RotationPeriod ("720h"); empty never rotates.
	RotationPeriod *metav1.Duration `json:"rotationPeriod,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// CredentialStatus records rotations.
type CredentialStatus struct {
	lifecycle.Status `json:",inline"`
	SecretName       string       `json:"secretName,omitempty"`
	LastRotated      *metav1.Time `json:"lastRotated,omitempty"`
	Rotations        int64        `json:"rotations,omitempty"`
}

// Certificate issues an X.509 certificate for DNSNames from the Kube CA (or from the CA
// Certificate named by Issuer) into a kubernetes.io/tls Secret and renews it RenewBefore its
// expiry. Namespaced.
// +genclient
// +kubebuilder:object:root=true
type Certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CertificateSpec   `json:"spec"`
	Status            CertificateStatus `json:"status,omitempty"`
}

// CertificateSpec is what to issue.
type CertificateSpec struct {
	DNSNames []string `json:"dnsNames,omitempty"`
	// CommonName defaults to the first DNS name, else the Certificate's name.
	CommonName string `json:"commonName,omitempty"`
	// SecretName defaults to the Certificate's name.
	SecretName string `json:"secretName,omitempty"`
	// Issuer names a Certificate with isCA in the same namespace; empty is the Kube CA.
	Issuer string `json:"issuer,omitempty"`
	// IsCA issues a CA certificate that other Certificates may name as Issuer.
	IsCA bool `json:"isCA,omitempty"`
	// Duration (default 2160h) and RenewBefore (default a third of Duration).
	Duration    *metav1.Duration `json:"duration,omitempty"`
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
	// DependsOn names kubeos.dev objects made ready before this one and torn down after it.
	DependsOn []DependencyRef `json:"dependsOn,omitempty"`
}

// CertificateStatus shows the certificate in force.
type CertificateStatus struct {
	lifecycle.Status `json:",inline"`
	NotBefore        *metav1.Time `json:"notBefore,omitempty"`
	NotAfter         *metav1.Time `json:"notAfter,omitempty"`
	SerialNumber     string       `json:"serialNumber,omitempty"`
	Renewals         int64        `json:"renewals,omitempty"`
}

// Lists.
type (
	// TenantList is a list of Tenants.
	// +kubebuilder:object:root=true
	TenantList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []Tenant `json:"items"`
	}
	// QuotaList is a list of Quotas.
	// +kubebuilder:object:root=true
	QuotaList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []Quota `json:"items"`
	}
	// AccessPolicyList is a list of AccessPolicies.
	// +kubebuilder:object:root=true
	AccessPolicyList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []AccessPolicy `json:"items"`
	}
	// SecretPolicyList is a list of SecretPolicies.
	// +kubebuilder:object:root=true
	SecretPolicyList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []SecretPolicy `json:"items"`
	}
	// CredentialList is a list of Credentials.
	// +kubebuilder:object:root=true
	CredentialList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []Credential `json:"items"`
	}
	// CertificateList is a list of Certificates.
	// +kubebuilder:object:root=true
	CertificateList struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata,omitempty"`
		Items           []Certificate `json:"items"`
	}
)

// LifecycleStatus implements lifecycle.Object.
func (o *Tenant) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// LifecycleStatus implements lifecycle.Object.
func (o *Quota) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// LifecycleStatus implements lifecycle.Object.
func (o *AccessPolicy) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// LifecycleStatus implements lifecycle.Object.
func (o *SecretPolicy) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// LifecycleStatus implements lifecycle.Object.
func (o *Credential) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

// LifecycleStatus implements lifecycle.Object.
func (o *Certificate) LifecycleStatus() *lifecycle.Status { return &o.Status.Status }

var (
	_ lifecycle.Object = (*Tenant)(nil)
	_ lifecycle.Object = (*Quota)(nil)
	_ lifecycle.Object = (*AccessPolicy)(nil)
	_ lifecycle.Object = (*SecretPolicy)(nil)
	_ lifecycle.Object = (*Credential)(nil)
	_ lifecycle.Object = (*Certificate)(nil)

	_ Dependent = (*Tenant)(nil)
	_ Dependent = (*Quota)(nil)
	_ Dependent = (*AccessPolicy)(nil)
	_ Dependent = (*SecretPolicy)(nil)
	_ Dependent = (*Credential)(nil)
	_ Dependent = (*Certificate)(nil)
	_ Dependent = (*Database)(nil)
	_ Dependent = (*Cache)(nil)
	_ Dependent = (*Topic)(nil)
	_ Dependent = (*Bucket)(nil)
	_ Dependent = (*Backup)(nil)
	_ Dependent = (*Alert)(nil)
	_ Dependent = (*Volume)(nil)
	_ Dependent = (*Component)(nil)
	_ Dependent = (*Route)(nil)
	_ Dependent = (*Release)(nil)
	_ Dependent = (*Application)(nil)
)

// AddToScheme registers the kinds.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Tenant{}, &TenantList{}, &Quota{}, &QuotaList{}, &AccessPolicy{}, &AccessPolicyList{},
		&SecretPolicy{}, &SecretPolicyList{}, &Credential{}, &CredentialList{}, &Certificate{}, &CertificateList{},
		&Database{}, &DatabaseList{}, &Cache{}, &CacheList{}, &Topic{}, &TopicList{}, &Bucket{}, &BucketList{},
		&Backup{}, &BackupList{}, &Alert{}, &AlertList{},
		&Volume{}, &VolumeList{}, &Component{}, &ComponentList{}, &Route{}, &RouteList{},
		&Release{}, &ReleaseList{}, &Application{}, &ApplicationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
