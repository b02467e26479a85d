package audit

import (
	"fmt"
	"os"
	"slices"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"

	"kubeos.dev/kube/internal/apiserver/request"
)

// Policy decides the level of each request. The zero value logs nothing.
type Policy struct {
	p auditv1.Policy
}

// LoadPolicyFile reads an audit.k8s.io/v1 Policy.
func LoadPolicyFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicy(data)
}

// ParsePolicy decodes an audit.k8s.io/v1 Policy strictly (unknown fields, unknown levels and
// stages are refused).
func ParsePolicy(data []byte) (*Policy, error) {
	var p auditv1.Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("decoding audit policy: %w", err)
	}
	if p.Kind != "Policy" || p.APIVersion != "audit.k8s.io/v1" {
		return nil, fmt.Errorf("audit policy: want kind Policy, apiVersion audit.k8s.io/v1; got kind %q, apiVersion %q", p.Kind, p.APIVersion)
	}
	if err := validStages(p.OmitStages, "omitStages"); err != nil {
		return nil, err
	}
	if len(p.Rules) == 0 {
		return nil, fmt.Errorf("audit policy: rules: at least one rule is required")
	}
	for i, r := range p.Rules {
		switch r.Level {
		case auditv1.LevelNone, auditv1.LevelMetadata, auditv1.LevelRequest, auditv1.LevelRequestResponse:
		default:
			return nil, fmt.Errorf("audit policy: rules[%d].level: %q is not one of None, Metadata, Request, RequestResponse", i, r.Level)
		}
		if err := validStages(r.OmitStages, fmt.Sprintf("rules[%d].omitStages", i)); err != nil {
			return nil, err
		}
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			return nil, fmt.Errorf("audit policy: rules[%d]: nonResourceURLs cannot be combined with resources or namespaces", i)
		}
	}
	return &Policy{p: p}, nil
}

func validStages(ss []auditv1.Stage, field string) error {
	for _, s := range ss {
		switch s {
		case auditv1.StageRequestReceived, auditv1.StageResponseStarted, auditv1.StageResponseComplete, auditv1.StagePanic:
		default:
			return fmt.Errorf("audit policy: %s: unknown stage %q", field, s)
		}
	}
	return nil
}

// Decision is the audit level of a request and the stages it omits.
type Decision struct {
	Level      auditv1.Level
	OmitStages []auditv1.Stage
}

// Omits reports whether stage is not logged.
func (d Decision) Omits(stage auditv1.Stage) bool { return slices.Contains(d.OmitStages, stage) }

// Decide is the level of a request by user u (nil when unauthenticated): the first rule
// that matches decides; no match is None.
func (p *Policy) Decide(u *request.User, info *request.Info) Decision {
	if p == nil {
		return Decision{Level: auditv1.LevelNone}
	}
	for i := range p.p.Rules {
		r := &p.p.Rules[i]
		if ruleMatches(r, u, info) {
			omit := p.p.OmitStages
			if len(r.OmitStages) > 0 {
				omit = append(slices.Clip(omit), r.OmitStages...)
			}
			return Decision{Level: r.Level, OmitStages: omit}
		}
	}
	return Decision{Level: auditv1.LevelNone}
}

// ruleMatches is upstream's rule matching (k8s.io/apiserver/pkg/audit/policy).
func ruleMatches(r *auditv1.PolicyRule, u *request.User, info *request.Info) bool {
	if len(r.Users) > 0 && (u == nil || !slices.Contains(r.Users, u.Name)) {
		return false
	}
	if len(r.UserGroups) > 0 {
		if u == nil {
			return false
		}
		matched := false
		for _, g := range u.Groups {
			if slices.Contains(r.UserGroups, g) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, info.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return resourceMatches(r, info)
	}
	if len(r.NonResourceURLs) > 0 {
		if info.IsResourceRequest {
			return false
		}
		for _, spec := range r.NonResourceURLs {
			if spec == "*" || spec == info.Path || (strings.HasSuffix(spec, "*") && strings.HasPrefix(info.Path, strings.TrimRight(spec, "*"))) {
				return true
			}
		}
		return false
	}
	return true
}

func resourceMatches(r *auditv1.PolicyRule, info *request.Info) bool {
	if !info.IsResourceRequest {
		return false
	}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, info.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := info.Resource
	if info.Subresource != "" {
		combined += "/" + info.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != info.APIGroup {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		for _, res := range gr.Resources {
			if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, info.Name) {
				continue
			}
			if res == combined || res == "*" {
				return true
			}
			if info.Subresource != "" && strings.HasPrefix(res, "*/") && info.Subresource == strings.TrimPrefix(res, "*/") {
				return true
			}
			if strings.HasSuffix(res, "/*") && info.Resource == strings.TrimSuffix(res, "/*") {
				return true
			}
		}
	}
	return false
}
