package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// DefaultModel is the model a plan step uses when neither it nor its agent
// names one: the server-wide model of the --llm-* flags.
const DefaultModel = "default"

// Bounds of what a definition asks of models.
const (
	MaxTemperature     = 2.0
	MaxOutputTokens    = 1_000_000
	MaxLLMTokensLimit  = 100_000_000
	outputSchemaURL    = "agentplane:output_schema.json"
	operationSchemaURL = "agentplane:operation.json"
)

// ActionTokenLimitReached is the action of the event emitted when a
// completion is not requested because a token budget is spent.
const ActionTokenLimitReached = "token_limit_reached"

// ErrorCodeLLM is the error code of a completion the model failed to give
// or gave unusable, and of the run it ended.
const ErrorCodeLLM = "llm_error"

// llmParams is what a plan step asks of its model, compiled.
type llmParams struct {
	// model is the registered name the step's completions go to.
	model           string
	temperature     *float64
	maxOutputTokens int64
	outputSchema    json.RawMessage
	schema          *jsonschema.Schema
	// argSchemas caches the compiled input schemas of the operations the
	// model calls, by function name (nil: none, or not compilable).
	argSchemas sync.Map
}

// MaxLLMTokens is the definition's default bound on a run's tokens
// (limits.max_llm_tokens), 0 when it sets none: the bound of an
// invocation that sets no max_llm_tokens.
func (d Definition) MaxLLMTokens() int64 {
	if d.Limits == nil {
		return 0
	}
	return d.Limits.MaxLLMTokens
}

// MaxLLMTokens is the compiled definition's Definition.MaxLLMTokens.
func (p *Program) MaxLLMTokens() int64 { return p.def.MaxLLMTokens() }

// missingModel says how to fix a model name the catalog does not know.
func missingModel(name string) string {
	if name == DefaultModel {
		return `no model named "default": the server defines none; set model on the agent or the step, or start the server with --llm-base-url`
	}
	return fmt.Sprintf("no model named %q: register it with POST /v1/models", name)
}

// checkAgentLLM checks the definition's model and limits.
func (c *compiler) checkAgentLLM() {
	if m := c.def.Model; m != "" && !c.catalog.HasModel(m) {
		c.bad("model", missingModel(m))
	}
	if l := c.def.Limits; l != nil && (l.MaxLLMTokens < 0 || l.MaxLLMTokens > MaxLLMTokensLimit) {
		c.bad("limits.max_llm_tokens", fmt.Sprintf("must be between 1 and %d (10^8), or left out for no bound", MaxLLMTokensLimit))
	}
}

// compileLLMParams resolves a plan step's model and checks its parameters.
func (c *compiler) compileLLMParams(field string, pl *Plan) *llmParams {
	lp := &llmParams{model: DefaultModel, temperature: pl.Temperature, maxOutputTokens: pl.MaxOutputTokens}
	switch {
	case pl.Model != "":
		lp.model = pl.Model
		if !c.catalog.HasModel(pl.Model) {
			c.bad(field+".model", missingModel(pl.Model))
		}
	case c.def.Model != "":
		lp.model = c.def.Model // checked under model
	case !c.catalog.HasModel(DefaultModel):
		c.bad(field+".model", `the step uses the model "default" and the server defines none: set model on the agent or the step, or start the server with --llm-base-url`)
	}
	if t := pl.Temperature; t != nil && (*t < 0 || *t > MaxTemperature) {
		c.bad(field+".temperature", fmt.Sprintf("must be between 0 and %g", MaxTemperature))
	}
	if n := pl.MaxOutputTokens; n < 0 || n > MaxOutputTokens {
		c.bad(field+".max_output_tokens", fmt.Sprintf("must be between 1 and %d", MaxOutputTokens))
	}
	if raw := bytes.TrimSpace(pl.OutputSchema); len(raw) > 0 && string(raw) != "null" {
		lp.outputSchema = raw
		sch, msg := compileSchema(raw, outputSchemaURL)
		if msg == "" && !describesObject(raw) {
			msg = `must describe an object: give it "type": "object"`
		}
		if msg != "" {
			c.bad(field+".output_schema", msg)
		}
		lp.schema = sch
	}
	return lp
}

// describesObject reports whether a schema's top-level type is object.
func describesObject(raw json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	return s.Type == "object"
}

// planSaveAs is the name a plan step saves its answer under: the step's
// save_as or the plan's; both set and different is refused.
func (c *compiler) planSaveAs(field string, s Step) string {
	switch {
	case s.Plan.SaveAs == "":
		return s.SaveAs
	case s.SaveAs != "" && s.SaveAs != s.Plan.SaveAs:
		c.bad(field+".plan.save_as", fmt.Sprintf("the step saves as %q and its plan as %q: keep one of them", s.SaveAs, s.Plan.SaveAs))
	}
	return s.Plan.SaveAs
}

// argsProblem says why arguments fail an operation's input schema, or "".
// A schema that does not compile (external references, another dialect)
// is not enforced here: the tool call reports what the tool refuses.
func (lp *llmParams) argsProblem(fn string, t target, raw string) string {
	if len(t.op.InputSchema) == 0 {
		return ""
	}
	v, ok := lp.argSchemas.Load(fn)
	if !ok {
		sch, msg := compileSchema(t.op.InputSchema, operationSchemaURL)
		if msg != "" {
			sch = nil
		}
		v, _ = lp.argSchemas.LoadOrStore(fn, sch)
	}
	sch, _ := v.(*jsonschema.Schema)
	if sch == nil {
		return ""
	}
	return schemaProblem(sch, []byte(raw))
}

// schemaProblem validates JSON text against a schema and says, in one
// line, what fails, or "".
func schemaProblem(sch *jsonschema.Schema, raw []byte) string {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	err = sch.Validate(v)
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var leaves []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, "/"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}
