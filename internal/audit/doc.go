// Package audit decides what the audit log records and writes it: an audit.k8s.io/v1 Policy
// (--audit-policy-file) gives each request a level (None, Metadata, Request,
// RequestResponse) and the stages to omit; a Log writes audit.k8s.io/v1 Events as JSON
// lines to a file rotated by size (--audit-log-path, --audit-log-maxsize,
// --audit-log-maxbackup). The HTTP filter that builds the events lives in
// internal/apiserver/filters; handlers report the object they act on through
// request.Audit.
//
// Annotations beyond what admission adds (the acting operator and the lifecycle phase of
// kinds the lifecycle engine manages) plug in through Log.Annotate.
package audit
