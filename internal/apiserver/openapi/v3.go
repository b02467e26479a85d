package openapi

import (
	"strings"

	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// v3Converter turns one kind's v2 paths into OpenAPI v3 paths as openapiconv does, but
// converts each distinct parameter, request body and response set once: a kind's
// operations share most of them, and with thousands of kinds the copies add up.
type v3Converter struct {
	params    map[string]*spec3.Parameter
	bodies    map[string]*spec3.RequestBody
	responses map[*spec.Responses]map[string]*spec3.Responses
}

func newV3Converter() *v3Converter {
	return &v3Converter{
		params:    map[string]*spec3.Parameter{},
		bodies:    map[string]*spec3.RequestBody{},
		responses: map[*spec.Responses]map[string]*spec3.Responses{},
	}
}

func (c *v3Converter) paths(in map[string]spec.PathItem) map[string]*spec3.Path {
	out := make(map[string]*spec3.Path, len(in))
	for p, item := range in {
		path := &spec3.Path{PathProps: spec3.PathProps{
			Get:    c.operation(item.Get),
			Put:    c.operation(item.Put),
			Post:   c.operation(item.Post),
			Delete: c.operation(item.Delete),
			Patch:  c.operation(item.Patch),
		}}
		for _, prm := range item.Parameters {
			path.Parameters = append(path.Parameters, c.parameter(prm))
		}
		out[p] = path
	}
	return out
}

func (c *v3Converter) operation(o *spec.Operation) *spec3.Operation {
	if o == nil {
		return nil
	}
	out := &spec3.Operation{
		VendorExtensible: o.VendorExtensible,
		OperationProps: spec3.OperationProps{
			Description: o.Description,
			Tags:        o.Tags,
			OperationId: o.ID,
		},
	}
	for _, prm := range o.Parameters {
		if prm.In == "body" && prm.Schema != nil {
			out.RequestBody = c.body(prm.Schema, o.Consumes)
			continue
		}
		out.Parameters = append(out.Parameters, c.parameter(prm))
	}
	out.Responses = c.responsesOf(o.Responses, o.Produces)
	return out
}

func (c *v3Converter) parameter(p spec.Parameter) *spec3.Parameter {
	key := p.Name + "\x00" + p.In + "\x00" + p.Description
	if v, ok := c.params[key]; ok {
		return v
	}
	v := openapiconv.ConvertParameter(p)
	c.params[key] = v
	return v
}

// v3Schema is a v2 schema that is only a $ref (which every body and response here is).
func v3Schema(s *spec.Schema) *spec.Schema {
	if name := refName(s.Ref); name != "" {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: refV3(name)}}
	}
	return openapiconv.ConvertSchema(s)
}

func (c *v3Converter) body(s *spec.Schema, consumes []string) *spec3.RequestBody {
	key := s.Ref.String() + "\x00" + strings.Join(consumes, ",")
	if v, ok := c.bodies[key]; ok {
		return v
	}
	media := &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: v3Schema(s)}}
	v := &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Content: map[string]*spec3.MediaType{}}}
	for _, ct := range consumes {
		v.Content[ct] = media
	}
	c.bodies[key] = v
	return v
}

func (c *v3Converter) responsesOf(r *spec.Responses, produces []string) *spec3.Responses {
	if r == nil {
		return nil
	}
	key := strings.Join(produces, ",")
	if v, ok := c.responses[r][key]; ok {
		return v
	}
	out := &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}}
	for code, resp := range r.StatusCodeResponses {
		v := &spec3.Response{ResponseProps: spec3.ResponseProps{Description: resp.Description}}
		if resp.Schema != nil {
			media := &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: v3Schema(resp.Schema)}}
			v.Content = make(map[string]*spec3.MediaType, len(produces))
			for _, ct := range produces {
				v.Content[ct] = media
			}
		}
		out.StatusCodeResponses[code] = v
	}
	if c.responses[r] == nil {
		c.responses[r] = map[string]*spec3.Responses{}
	}
	c.responses[r][key] = out
	return out
}
