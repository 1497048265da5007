package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentplane/agentplane/internal/problem"
)

const inputsURL = "agentplane:inputs.json"

// noLoader refuses every external reference: an inputs schema must be self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed (%s)", url)
}

// compileInputs compiles an inputs schema (draft 2020-12 unless it says
// otherwise); the message says what is wrong.
func compileInputs(raw json.RawMessage) (*jsonschema.Schema, string) {
	return compileSchema(raw, inputsURL)
}

// compileSchema compiles a self-contained JSON Schema, named by url in
// its own errors; the message says what is wrong.
func compileSchema(raw json.RawMessage, url string) (*jsonschema.Schema, string) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, "not JSON: " + err.Error()
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, err.Error()
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, "not a valid JSON Schema: " + oneLine(err.Error())
	}
	return sch, ""
}

var printer = message.NewPrinter(language.English)

// ValidateContext checks an invocation's context against the agent's
// inputs; nil means it passes. A nil context is validated as {}. Field
// paths start at "context". A number no double holds (1e400) is refused
// first, whatever the inputs: expressions could not read it (see
// exprNumber), nor could most JSON parsers an agent's code uses.
func (p *Program) ValidateContext(ctx map[string]any) []problem.FieldError {
	return validateContext(p.inputs, ctx)
}

// ValidateContext checks a context as an invocation of v would
// (Program.ValidateContext), its inputs schema compiled anew: for a check
// made before any invocation, such as a schedule's.
func (v *Version) ValidateContext(ctx map[string]any) []problem.FieldError {
	var sch *jsonschema.Schema
	if raw := v.Inputs(); len(raw) > 0 {
		sch, _ = compileInputs(raw) // it compiled when v was deployed
	}
	return validateContext(sch, ctx)
}

// validateContext checks ctx's numbers, then ctx against inputs when it
// is not nil.
func validateContext(inputs *jsonschema.Schema, ctx map[string]any) []problem.FieldError {
	var huge []problem.FieldError
	numbersInRange(ctx, nil, &huge)
	if len(huge) > 0 {
		sort.SliceStable(huge, func(i, j int) bool { return huge[i].Field < huge[j].Field })
		return huge
	}
	if inputs == nil {
		return nil
	}
	if ctx == nil {
		ctx = map[string]any{}
	}
	raw, err := json.Marshal(ctx)
	if err != nil {
		return []problem.FieldError{{Field: "context", Message: "not representable as JSON: " + err.Error()}}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []problem.FieldError{{Field: "context", Message: err.Error()}}
	}
	err = inputs.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []problem.FieldError{{Field: "context", Message: err.Error()}}
	}
	var out []problem.FieldError
	collectLeaves(ve, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// numbersInRange adds a field error for each number in v, at loc, past a
// double's range.
func numbersInRange(v any, loc []string, out *[]problem.FieldError) {
	switch x := v.(type) {
	case json.Number:
		if _, ok := exprNumber(x); !ok {
			*out = append(*out, problem.FieldError{Field: instancePath(loc), Message: fmt.Sprintf(
				"is %.32s, a number beyond the range of a double (about ±1.8e308): send it as a string", x)})
		}
	case map[string]any:
		for k, e := range x {
			numbersInRange(e, append(loc[:len(loc):len(loc)], k), out)
		}
	case []any:
		for i, e := range x {
			numbersInRange(e, append(loc[:len(loc):len(loc)], strconv.Itoa(i)), out)
		}
	}
}

// collectLeaves flattens a validation error tree into its leaf causes.
func collectLeaves(ve *jsonschema.ValidationError, out *[]problem.FieldError) {
	if len(ve.Causes) == 0 {
		// A missing required property is reported at the property itself,
		// so clients can point at the field to fill in.
		if req, ok := ve.ErrorKind.(*kind.Required); ok {
			for _, name := range req.Missing {
				*out = append(*out, problem.FieldError{
					Field:   instancePath(append(append([]string{}, ve.InstanceLocation...), name)),
					Message: "is required",
				})
			}
			return
		}
		*out = append(*out, problem.FieldError{
			Field:   instancePath(ve.InstanceLocation),
			Message: ve.ErrorKind.LocalizedString(printer),
		})
		return
	}
	for _, c := range ve.Causes {
		collectLeaves(c, out)
	}
}

// instancePath renders a JSON location as "context.a.b[2]".
func instancePath(loc []string) string {
	var b strings.Builder
	b.WriteString("context")
	for _, tok := range loc {
		if isIndex(tok) {
			b.WriteString("[" + tok + "]")
		} else {
			b.WriteString("." + tok)
		}
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
