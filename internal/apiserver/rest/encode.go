package rest

import "kubeos.dev/kube/internal/jsonenc"

// The handler's encoders: see package jsonenc.
var (
	appendJSON   = jsonenc.AppendValue
	appendString = jsonenc.AppendString
)
