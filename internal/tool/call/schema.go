package call

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/agentplane/agentplane/internal/problem"
)

// maxSchemaErrors bounds how many schema violations a call reports.
const maxSchemaErrors = 5

// schemaKey names one schema of one operation of a tool revision: a
// revision's schemas never change, and the key is small whatever the schema.
type schemaKey struct {
	tool      string
	revision  int
	operation string
	// which says which of the operation's schemas: "body".
	which string
}

// schemaCache compiles each schema once, keeping the least recently used
// out when full.
type schemaCache struct {
	lru *lru.Cache[schemaKey, *jsonschema.Schema] // nil when the schema does not compile
}

func newSchemaCache(size int) schemaCache {
	c, _ := lru.New[schemaKey, *jsonschema.Schema](size) // errors only for a size under 1
	return schemaCache{lru: c}
}

// forget drops a tool's schemas, of every revision.
func (c *schemaCache) forget(toolID string) {
	for _, k := range c.lru.Keys() {
		if k.tool == toolID {
			c.lru.Remove(k)
		}
	}
}

// validate checks a JSON document against schema, the one key names, and
// returns what is wrong, fields named "body" or "body/<pointer>". A schema
// that does not compile (a spec's defect) validates nothing: the API will
// judge the body itself.
func (c *schemaCache) validate(key schemaKey, schema json.RawMessage, doc []byte) []problem.FieldError {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil
	}
	sch := c.compiled(key, schema)
	if sch == nil {
		return nil
	}
	return violations(sch, doc, "body", false)
}

// violations checks doc against sch: what is wrong, fields named root or
// root<pointer>, at most maxSchemaErrors of them. With valueFree no
// message quotes a value of doc (a recorded document is checked for a
// reader who may not read it).
func violations(sch *jsonschema.Schema, doc []byte, root string, valueFree bool) []problem.FieldError {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return []problem.FieldError{{Field: root, Message: "is not valid JSON"}}
	}
	err = sch.Validate(inst)
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil
	}
	var out []problem.FieldError
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		field := root
		if u.InstanceLocation != "" {
			field += u.InstanceLocation
		}
		msg := u.Error.String()
		if valueFree {
			msg = withoutValue(u.Error.Kind, msg)
		}
		out = append(out, problem.FieldError{Field: field, Message: msg})
		if len(out) == maxSchemaErrors {
			break
		}
	}
	if len(out) == 0 {
		out = append(out, problem.FieldError{Field: root, Message: "does not match the operation's schema"})
	}
	return out
}

// Schema is an operation's schema compiled as a call's body is checked
// against it, for checking recorded documents (a tool revision's impact).
type Schema struct{ s *jsonschema.Schema }

// CompileSchema compiles an operation's JSON Schema; nil when it is empty
// or does not compile (such a schema checks nothing).
func CompileSchema(schema json.RawMessage) *Schema {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil
	}
	if s := compile(schema); s != nil {
		return &Schema{s: s}
	}
	return nil
}

// Check returns what is wrong with the JSON document doc, each field
// named root or root/<pointer>; a nil Schema finds nothing wrong.
func (s *Schema) Check(doc []byte, root string) []problem.FieldError {
	if s == nil {
		return nil
	}
	return violations(s.s, doc, root, true)
}

// withoutValue is the message of a violation of kind k without the
// document's value the library's message quotes (a pattern's or a
// format's string, a bound's number); msg for the other kinds, which quote
// the schema, types, names or counts only.
func withoutValue(k jsonschema.ErrorKind, msg string) string {
	rat := func(r *big.Rat) string { f, _ := r.Float64(); return strconv.FormatFloat(f, 'g', -1, 64) }
	switch k := k.(type) {
	case *kind.Pattern:
		return "does not match pattern " + strconv.Quote(k.Want)
	case *kind.Format:
		return "is not valid " + k.Want
	case *kind.Minimum:
		return "minimum: want " + rat(k.Want)
	case *kind.Maximum:
		return "maximum: want " + rat(k.Want)
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum: want " + rat(k.Want)
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum: want " + rat(k.Want)
	case *kind.MultipleOf:
		return "multipleOf: want " + rat(k.Want)
	}
	return msg
}

// compiled returns the compiled schema, from the cache when key names a
// stored tool (one without an id is never cached: its key names nothing).
func (c *schemaCache) compiled(key schemaKey, schema json.RawMessage) *jsonschema.Schema {
	if key.tool == "" {
		return compile(schema)
	}
	if s, ok := c.lru.Get(key); ok {
		return s
	}
	s := compile(schema)
	c.lru.Add(key, s)
	return s
}

// compile compiles an OpenAPI schema as JSON Schema 2020-12, with no loader:
// a $ref to a file or URL is never followed.
func compile(schema json.RawMessage) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil
	}
	doc = fromOpenAPI(doc)
	comp := jsonschema.NewCompiler()
	comp.UseLoader(jsonschema.SchemeURLLoader{})
	comp.DefaultDraft(jsonschema.Draft2020)
	const loc = "urn:agentplane:body"
	if err := comp.AddResource(loc, doc); err != nil {
		return nil
	}
	s, err := comp.Compile(loc)
	if err != nil {
		return nil
	}
	return s
}

// fromOpenAPI rewrites OpenAPI 3.0 schema forms into JSON Schema: nullable
// becomes a "null" type, boolean exclusiveMinimum/Maximum become numbers.
func fromOpenAPI(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = fromOpenAPI(v[i])
		}
		return v
	case map[string]any:
		for k, sub := range v {
			if strings.HasPrefix(k, "x-") || k == "example" || k == "examples" || k == "default" || k == "enum" || k == "const" {
				continue
			}
			v[k] = fromOpenAPI(sub)
		}
		if n, ok := v["nullable"].(bool); ok {
			delete(v, "nullable")
			if t, ok := v["type"].(string); ok && n {
				v["type"] = []any{t, "null"}
			}
		}
		for _, pair := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
			if ex, ok := v[pair[0]].(bool); ok {
				delete(v, pair[0])
				if ex {
					if lim, ok := v[pair[1]]; ok {
						v[pair[0]] = lim
						delete(v, pair[1])
					}
				}
			}
		}
		return v
	default:
		return v
	}
}
