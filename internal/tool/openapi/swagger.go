package openapi

import (
	"slices"
	"strings"
)

// fromSwagger rewrites a Swagger 2.0 document's tree, in place, into the
// OpenAPI 3.0 shape the builder reads, as kin-openapi's openapi2conv does:
//
//   - a body parameter becomes the operation's requestBody, under the media
//     type the builder would pick of those the operation consumes (else the
//     document's, else application/json); formData parameters become an
//     object request body, application/x-www-form-urlencoded unless consumes
//     says otherwise; path-level ones apply to each operation that does not
//     redeclare them;
//   - other parameters keep their Swagger form, whose type, format, items and
//     bounds paramSchema reads as a schema;
//   - a response's schema goes under the media type the builder would pick
//     of those produced (else application/json), responses shared under
//     #/responses included;
//   - securityDefinitions become components.securitySchemes (basic → http,
//     application → clientCredentials, accessCode → authorizationCode);
//   - in schemas, type file becomes a binary string, x-nullable nullable and
//     a discriminator name an object; a reference's siblings are dropped, as
//     Swagger 2.0 says they are ignored.
//
// References into definitions are left as they are: the renderer follows any
// local JSON pointer. Converting in place, instead of decoding into
// kin-openapi's typed model and encoding and decoding its OpenAPI 3 form,
// keeps an import's peak memory a small multiple of the parsed document's
// (Kubernetes' 4 MB description: 124 MB at peak that way).
func fromSwagger(root map[string]any, warn func(string, ...any)) {
	c := &swaggerConv{
		root:     root,
		consumes: root["consumes"],
		produces: root["produces"],
		warn:     warn,
	}
	if defs, ok := root["definitions"].(map[string]any); ok {
		for _, s := range defs {
			swaggerSchema(s)
		}
	}
	// Shared responses are converted where they are, so that references to
	// them keep resolving. Shared body and formData parameters become
	// request bodies where they are used.
	if rs, ok := root["responses"].(map[string]any); ok {
		for _, r := range rs {
			c.response(r, c.produces)
		}
	}
	components, _ := root["components"].(map[string]any)
	if components == nil {
		components = make(map[string]any)
		root["components"] = components
	}
	if defs, ok := root["securityDefinitions"].(map[string]any); ok {
		schemes := make(map[string]any, len(defs))
		for _, name := range sortedKeys(defs) {
			if s := c.securityScheme(name, defs[name]); s != nil {
				schemes[name] = s
			}
		}
		components["securitySchemes"] = schemes
	}
	paths, _ := root["paths"].(map[string]any)
	for _, path := range sortedKeys(paths) {
		item, ok := paths[path].(map[string]any)
		if !ok {
			continue
		}
		c.pathItem(path, item)
	}
}

// swaggerConv holds what converting one document needs.
type swaggerConv struct {
	root               map[string]any
	consumes, produces any
	warn               func(string, ...any)
}

// isBodyParam reports whether a Swagger parameter is part of the body.
func isBodyParam(p map[string]any) bool {
	in, _ := p["in"].(string)
	return in == "body" || in == "formData"
}

// pathItem converts a path item's parameters and operations.
func (c *swaggerConv) pathItem(path string, item map[string]any) {
	shared, sharedBody := c.paramList(item["parameters"])
	if shared != nil {
		item["parameters"] = shared
	}
	for _, method := range methods {
		op, ok := item[method].(map[string]any)
		if !ok {
			continue
		}
		where := "paths." + path + "." + method
		params, body := c.paramList(op["parameters"])
		if params != nil {
			op["parameters"] = params
		}
		// A path-level body parameter applies unless the operation declares
		// one of the same identity.
		for _, p := range sharedBody {
			if !slices.ContainsFunc(body, func(q bodyParam) bool { return q.identity == p.identity }) {
				body = append(body, p)
			}
		}
		consumes := c.consumes
		if v, ok := op["consumes"]; ok {
			consumes = v
		}
		if rb := c.requestBody(where, body, consumes); rb != nil {
			op["requestBody"] = rb
		}
		produces := c.produces
		if v, ok := op["produces"]; ok {
			produces = v
		}
		if rs, ok := op["responses"].(map[string]any); ok {
			for _, r := range rs {
				c.response(r, produces)
			}
		}
	}
}

// bodyParam is a body or formData parameter, with the identity by which an
// operation overrides a path-level one.
type bodyParam struct {
	identity string
	p        map[string]any
}

// paramList takes the body and formData parameters out of a parameter list.
// It returns nil when there are none, or when raw is not an array (left for
// the builder to report).
func (c *swaggerConv) paramList(raw any) ([]any, []bodyParam) {
	list, ok := raw.([]any)
	if !ok {
		return nil, nil
	}
	var out []any
	var body []bodyParam
	for i, e := range list {
		p := resolve(c.root, e)
		if p == nil || !isBodyParam(p) {
			if out != nil {
				out = append(out, e)
			}
			continue
		}
		if out == nil {
			out = append(make([]any, 0, len(list)), list[:i]...)
		}
		id, _ := e.(map[string]any)["$ref"].(string)
		if id == "" {
			in, _ := p["in"].(string)
			name, _ := p["name"].(string)
			id = in + " " + name
		}
		body = append(body, bodyParam{identity: id, p: p})
	}
	return out, body
}

// paramSchemaKeys are the members of a Swagger parameter that describe its
// value, as a schema does.
var paramSchemaKeys = []string{
	"type", "format", "items", "default", "enum", "minimum", "maximum",
	"exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
	"minItems", "maxItems", "uniqueItems", "multipleOf", "allowEmptyValue",
}

// valueSchema is the schema of a Swagger non-body parameter's value.
func valueSchema(p map[string]any) map[string]any {
	s := make(map[string]any, 4)
	for _, k := range paramSchemaKeys {
		if v, ok := p[k]; ok {
			s[k] = v
		}
	}
	swaggerSchema(s)
	return s
}

// requestBody is the request body of an operation's body or formData
// parameters, nil without any.
func (c *swaggerConv) requestBody(where string, params []bodyParam, consumes any) map[string]any {
	var body, form []map[string]any
	for _, bp := range params {
		if bp.p["in"] == "body" {
			body = append(body, bp.p)
		} else {
			form = append(form, bp.p)
		}
	}
	switch {
	case len(body) > 1:
		c.warn("%s: %d body parameters; only the first is the request body", where, len(body))
	case len(body) == 1 && len(form) > 0:
		c.warn("%s: body and formData parameters together; the formData parameters are ignored", where)
	}
	if len(body) > 0 {
		p := body[0]
		schema, ok := p["schema"]
		if !ok {
			schema = map[string]any{}
		}
		swaggerSchema(schema)
		rb := map[string]any{"content": content(consumes, "application/json", schema)}
		for _, k := range []string{"description", "required"} {
			if v, ok := p[k]; ok {
				rb[k] = v
			}
		}
		return rb
	}
	if len(form) == 0 {
		return nil
	}
	props := make(map[string]any, len(form))
	var required []string
	for _, p := range form {
		name, _ := p["name"].(string)
		s := valueSchema(p)
		if d, ok := p["description"]; ok {
			s["description"] = d
		}
		for k, v := range p {
			if strings.HasPrefix(k, "x-") {
				s[k] = v // as kin-openapi does: a form field's extensions are its schema's
			}
		}
		props[name] = s
		if r, _ := p["required"].(bool); r {
			required = append(required, name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		slices.Sort(required)
		list := make([]any, len(required))
		for i, name := range required {
			list[i] = name
		}
		schema["required"] = list
	}
	return map[string]any{"content": content(consumes, "application/x-www-form-urlencoded", schema)}
}

// content is the content map of a body or response: schema under the media
// type the builder would pick among those listed (else under def). The
// others are left out: Kubernetes lists three for each of its thousands of
// responses.
func content(types any, def string, schema any) map[string]any {
	list, _ := types.([]any)
	listed := make(map[string]any, len(list))
	for _, t := range list {
		if s, ok := t.(string); ok && s != "" {
			listed[s] = nil
		}
	}
	_, ct := pickMediaType(listed, false)
	if ct == "" {
		ct = def
	}
	return map[string]any{ct: map[string]any{"schema": schema}}
}

// response converts a response in place; a reference is left as it is.
func (c *swaggerConv) response(raw any, produces any) {
	r, ok := raw.(map[string]any)
	if !ok {
		return
	}
	if _, isRef := r["$ref"]; isRef {
		return
	}
	if schema, ok := r["schema"]; ok {
		swaggerSchema(schema)
		r["content"] = content(produces, "application/json", schema)
		delete(r, "schema")
	}
}

// oauthFlows names the OpenAPI 3 flow of each Swagger 2.0 OAuth2 flow.
var oauthFlows = map[string]string{
	"implicit":    "implicit",
	"password":    "password",
	"application": "clientCredentials",
	"accessCode":  "authorizationCode",
}

// securityScheme converts a security definition, nil when it is not one.
func (c *swaggerConv) securityScheme(name string, raw any) map[string]any {
	d, ok := raw.(map[string]any)
	if !ok {
		c.warn("securityDefinitions.%s: not an object; ignored", name)
		return nil
	}
	out := make(map[string]any, 4)
	if v, ok := d["description"]; ok {
		out["description"] = v
	}
	switch t, _ := d["type"].(string); t {
	case "basic":
		out["type"], out["scheme"] = "http", "basic"
	case "apiKey":
		out["type"], out["in"], out["name"] = "apiKey", d["in"], d["name"]
	case "oauth2":
		f, _ := d["flow"].(string)
		flow, ok := oauthFlows[f]
		if !ok {
			c.warn("securityDefinitions.%s: unsupported oauth2 flow %q; ignored", name, f)
			return nil
		}
		spec := make(map[string]any, 3)
		for _, k := range []string{"authorizationUrl", "tokenUrl", "scopes"} {
			if v, ok := d[k]; ok {
				spec[k] = v
			}
		}
		out["type"], out["flows"] = "oauth2", map[string]any{flow: spec}
	default:
		c.warn("securityDefinitions.%s: unsupported type %q; ignored", name, t)
		return nil
	}
	return out
}

// swaggerSchema rewrites a Swagger 2.0 schema and its subschemas, in place,
// into the OpenAPI 3.0 dialect: type file becomes a binary string,
// x-nullable nullable, and a discriminator property name a discriminator
// object; a reference's siblings go. Rewriting twice changes nothing.
func swaggerSchema(node any) {
	s, ok := node.(map[string]any)
	if !ok {
		return
	}
	if _, ok := s["$ref"].(string); ok {
		// Swagger 2.0 ignores a reference's siblings.
		for k := range s {
			if k != "$ref" {
				delete(s, k)
			}
		}
		return
	}
	if s["type"] == "file" {
		s["type"], s["format"] = "string", "binary"
	}
	if n, ok := s["x-nullable"].(bool); ok {
		s["nullable"] = n
		delete(s, "x-nullable")
	}
	if d, ok := s["discriminator"].(string); ok {
		s["discriminator"] = map[string]any{"propertyName": d}
	}
	for k, v := range s {
		switch {
		case schemaKeywords[k]:
			if list, ok := v.([]any); ok {
				for _, e := range list {
					swaggerSchema(e)
				}
				continue
			}
			swaggerSchema(v)
		case schemaMapKeywords[k]:
			if m, ok := v.(map[string]any); ok {
				for _, e := range m {
					swaggerSchema(e)
				}
			}
		case schemaListKeywords[k]:
			if list, ok := v.([]any); ok {
				for _, e := range list {
					swaggerSchema(e)
				}
			}
		}
	}
}
