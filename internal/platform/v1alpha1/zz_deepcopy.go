// Code written in deepcopy-gen's form (no generator in this module's toolchain). DO NOT
// add fields to the types without copying them here.

package v1alpha1

import "k8s.io/apimachinery/pkg/runtime"

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopyInto copies in into out.
func (in *Tenant) DeepCopyInto(out *Tenant) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Environments = cloneSlice(in.Spec.Environments)
	out.Spec.Admins = cloneSlice(in.Spec.Admins)
	in.Status.Status.DeepCopyInto(&out.Status.Status)
	out.Status.Namespaces = cloneSlice(in.Status.Namespaces)
}

// DeepCopy returns a copy.
func (in *Tenant) DeepCopy() *Tenant {
	if in == nil {
		return nil
	}
	out := new(Tenant)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Tenant) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *TenantList) DeepCopyInto(out *TenantList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Tenant, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *TenantList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(TenantList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *Quota) DeepCopyInto(out *Quota) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Limits = cloneSlice(in.Spec.Limits)
	in.Status.Status.DeepCopyInto(&out.Status.Status)
	out.Status.Usage = cloneSlice(in.Status.Usage)
}

// DeepCopy returns a copy.
func (in *Quota) DeepCopy() *Quota {
	if in == nil {
		return nil
	}
	out := new(Quota)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Quota) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *QuotaList) DeepCopyInto(out *QuotaList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Quota, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *QuotaList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(QuotaList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *AccessPolicy) DeepCopyInto(out *AccessPolicy) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Subjects = cloneSlice(in.Spec.Subjects)
	out.Spec.AllowedEnvs = cloneSlice(in.Spec.AllowedEnvs)
	out.Spec.Via = cloneSlice(in.Spec.Via)
	in.Status.Status.DeepCopyInto(&out.Status.Status)
}

// DeepCopy returns a copy.
func (in *AccessPolicy) DeepCopy() *AccessPolicy {
	if in == nil {
		return nil
	}
	out := new(AccessPolicy)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *AccessPolicy) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *AccessPolicyList) DeepCopyInto(out *AccessPolicyList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]AccessPolicy, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *AccessPolicyList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(AccessPolicyList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *SecretPolicy) DeepCopyInto(out *SecretPolicy) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Rules != nil {
		out.Spec.Rules = make([]SecretPolicyRule, len(in.Spec.Rules))
		for i, r := range in.Spec.Rules {
			out.Spec.Rules[i] = SecretPolicyRule{SecretNames: cloneSlice(r.SecretNames), Kinds: cloneSlice(r.Kinds)}
		}
	}
	in.Status.Status.DeepCopyInto(&out.Status.Status)
}

// DeepCopy returns a copy.
func (in *SecretPolicy) DeepCopy() *SecretPolicy {
	if in == nil {
		return nil
	}
	out := new(SecretPolicy)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *SecretPolicy) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *SecretPolicyList) DeepCopyInto(out *SecretPolicyList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]SecretPolicy, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *SecretPolicyList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(SecretPolicyList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *Credential) DeepCopyInto(out *Credential) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.RotationPeriod = clonePtr(in.Spec.RotationPeriod)
	in.Status.Status.DeepCopyInto(&out.Status.Status)
	out.Status.LastRotated = in.Status.LastRotated.DeepCopy()
}

// DeepCopy returns a copy.
func (in *Credential) DeepCopy() *Credential {
	if in == nil {
		return nil
	}
	out := new(Credential)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Credential) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *CredentialList) DeepCopyInto(out *CredentialList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Credential, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *CredentialList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(CredentialList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies in into out.
func (in *Certificate) DeepCopyInto(out *Certificate) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.DNSNames = cloneSlice(in.Spec.DNSNames)
	out.Spec.Duration = clonePtr(in.Spec.Duration)
	out.Spec.RenewBefore = clonePtr(in.Spec.RenewBefore)
	in.Status.Status.DeepCopyInto(&out.Status.Status)
	out.Status.NotBefore = in.Status.NotBefore.DeepCopy()
	out.Status.NotAfter = in.Status.NotAfter.DeepCopy()
}

// DeepCopy returns a copy.
func (in *Certificate) DeepCopy() *Certificate {
	if in == nil {
		return nil
	}
	out := new(Certificate)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Certificate) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *CertificateList) DeepCopyInto(out *CertificateList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Certificate, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *CertificateList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(CertificateList)
	in.DeepCopyInto(out)
	return out
}
