package agent

import (
	"encoding/json"
	"fmt"
	"github.com/agentplane/agentplane/internal/tool"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ChatRequest is a chat completion request in the OpenAI chat-completions
// tool-calling shape, provider-neutral: Model names a registered model (the
// Completer finds its endpoint), never a provider's model id. It is plain
// data, so it can be recorded and compared for replay.
type ChatRequest struct {
	// Model is the registered model's name ("default" for the server-wide one).
	Model    string        `json:"model,omitempty"`
	Messages []ChatMessage `json:"messages"`
	Tools    []ChatTool    `json:"tools,omitempty"`
	// Temperature and MaxOutputTokens are passed to the provider when set.
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int64    `json:"max_output_tokens,omitempty"`
	// OutputSchema is a JSON Schema the final answer must be an object of:
	// the provider's structured output where it has one.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ChatMessage is one message of a conversation.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
	// ToolCallID answers a call, in a tool message.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ChatToolCall is a function call the model asks for.
type ChatToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments object.
	Arguments string `json:"arguments"`
}

// ChatTool is a function offered to the model.
type ChatTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ChatResponse is the model's answer: an assistant message, with what the
// provider reports of it.
type ChatResponse struct {
	Message ChatMessage `json:"message"`
	// Usage is the tokens the provider counted; nil when it reported none.
	Usage *Usage `json:"usage,omitempty"`
	// FinishReason is the provider's, normalised to the OpenAI vocabulary:
	// stop, tool_calls, length, content_filter.
	FinishReason string `json:"finish_reason,omitempty"`
	// ID and Model are the provider's response id and the model that answered.
	ID    string `json:"id,omitempty"`
	Model string `json:"model,omitempty"`
}

// Usage is the tokens of one completion or a sum of them.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

var (
	badFnChars  = regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	emptyObject = json.RawMessage(`{"type":"object"}`)
)

// FunctionName is the LLM function name of a tool operation,
// "<tool>__<operation>", with characters outside [a-zA-Z0-9_-] replaced by
// "_" and cut to 64 characters.
func FunctionName(toolName, opID string) string {
	name := badFnChars.ReplaceAllString(toolName+"__"+opID, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// operationTargets resolves refs, each a tool of the agent's (all its
// operations, by id) or <tool>.<operation>, to the operations they name,
// each once, in order; a ref that names none is an error at field[i].
func (c *compiler) operationTargets(field string, refs []string) []target {
	var targets []target
	seen := map[string]bool{}
	add := func(t target) {
		if key := t.tool + "." + t.op.ID; !seen[key] {
			seen[key] = true
			targets = append(targets, t)
		}
	}
	for i, ref := range refs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !strings.Contains(ref, ".") {
			if !c.allowed[ref] {
				c.bad(f, fmt.Sprintf("tool %q is not in the agent's tools", ref))
				continue
			}
			for _, t := range c.toolOperations(ref) {
				add(t)
			}
			continue
		}
		if t, ok := c.resolveCall(f, ref); ok {
			add(t)
		}
	}
	return targets
}

// uniqueFunctionName is FunctionName(toolName, opID), or, when taken says
// that name is taken (two operations whose names are the same once cleaned
// or cut), the same with the first suffix _2, _3, … that is free, within
// 64 characters.
func uniqueFunctionName(toolName, opID string, taken func(string) bool) string {
	base := FunctionName(toolName, opID)
	name := base
	for n := 2; taken(name); n++ {
		suffix := "_" + strconv.Itoa(n)
		name = base[:min(len(base), 64-len(suffix))] + suffix
	}
	return name
}

func (c *compiler) compilePlan(field string, pl *Plan) *cplan {
	cp := &cplan{maxCalls: pl.MaxCalls, byName: map[string]target{}}
	cp.prompt = c.expr(c.stepEnv, pl.Prompt, field+".prompt", wantString)
	cp.llm = c.compileLLMParams(field, pl)
	switch {
	case pl.MaxCalls == 0:
		cp.maxCalls = DefaultPlanMaxCalls
	case pl.MaxCalls < 0 || pl.MaxCalls > MaxPlanMaxCalls:
		c.bad(field+".max_calls", fmt.Sprintf("must be between 1 and %d", MaxPlanMaxCalls))
	}
	var targets []target
	errsBefore := len(c.errs)
	if len(pl.Operations) == 0 {
		for _, t := range c.def.Tools {
			targets = append(targets, c.toolOperations(t)...)
		}
	} else {
		targets = c.operationTargets(field+".operations", pl.Operations)
	}
	for _, t := range targets {
		name := uniqueFunctionName(t.tool, t.op.ID, func(n string) bool { return cp.byName[n].tool != "" })
		cp.byName[name] = t
		params := t.op.InputSchema
		if len(params) == 0 || !json.Valid(params) {
			params = emptyObject
		}
		cp.functions = append(cp.functions, ChatTool{Name: name, Description: t.op.Description, Parameters: params})
	}
	cp.offer = pl.MaxFunctions
	switch {
	case pl.MaxFunctions == 0:
		cp.offer = DefaultPlanFunctions
	case pl.MaxFunctions < 1 || pl.MaxFunctions > MaxPlanFunctions:
		c.bad(field+".max_functions", fmt.Sprintf("must be between 1 and %d", MaxPlanFunctions))
	}
	switch {
	case len(cp.functions) == 0 && len(c.errs) == errsBefore:
		c.bad(field, "the plan offers the model no operations")
	case len(cp.functions) > MaxPlanOperations:
		c.bad(field, fmt.Sprintf("the plan chooses among %d operations; at most %d: narrow them with operations", len(cp.functions), MaxPlanOperations))
	case len(cp.functions) > cp.offer:
		ops := make([]tool.Operation, len(cp.functions))
		for i, f := range cp.functions {
			t := cp.byName[f.Name]
			ops[i] = tool.Operation{ID: t.tool + "." + t.op.ID, Kind: t.op.Kind, Description: t.op.Description}
		}
		cp.index = tool.NewSearchIndex("", ops)
	}
	return cp
}

// offered are the functions a completion is offered: all of them, or,
// when there are more than the step offers, the best matches of the goal
// and the conversation so far, in the plan's order (then the first ones
// when fewer match). The choice depends only on the conversation, so a
// replay of the same conversation offers the same functions, and the
// recorded completion's request hash holds them.
func (p *cplan) offered(messages []ChatMessage) []ChatTool {
	if p.index == nil {
		return p.functions
	}
	var text strings.Builder
	for _, m := range messages {
		if m.Role == RoleSystem {
			continue
		}
		text.WriteString(m.Content)
		text.WriteByte(' ')
		for _, tc := range m.ToolCalls {
			text.WriteString(tc.Name + " ")
		}
	}
	pick := make([]bool, len(p.functions))
	n := 0
	for _, h := range p.index.Search(text.String(), "") {
		if n == p.offer {
			break
		}
		pick[h.Index], n = true, n+1
	}
	for i := 0; n < p.offer && i < len(pick); i++ {
		if !pick[i] {
			pick[i], n = true, n+1
		}
	}
	out := make([]ChatTool, 0, p.offer)
	for i, f := range p.functions {
		if pick[i] {
			out = append(out, f)
		}
	}
	return out
}

// toolOperations lists a registered tool's operations in id order.
func (c *compiler) toolOperations(toolName string) []target {
	if !c.catalog.Has(toolName) {
		return nil
	}
	ops := c.catalog.Operations(toolName)
	sort.Slice(ops, func(i, j int) bool { return ops[i].ID < ops[j].ID })
	out := make([]target, len(ops))
	for i, op := range ops {
		out[i] = target{tool: toolName, op: op}
	}
	return out
}

// planStep lets the model choose calls until it gives its final answer or
// the step's max_calls is spent. Every completion emits a completion event
// (the step number Complete is given); each call it asks for is then checked
// and made like a call step's, with the plan step's action. The final
// answer (its text, or with output_schema the object) is saved under
// save_as. A bad answer the model can mend (an invalid call, an answer
// failing the schema) is told to it once; a second one fails the step.
func (r *runner) planStep(s *cstep) (*ending, error) {
	pl := s.plan
	prompt, err := pl.prompt.evalString(r.ctx, r.act)
	if err != nil {
		return r.stepFailed(s, Event{}, fmt.Errorf("plan.prompt: %w", err))
	}
	system, err := r.systemPrompt(pl.llm)
	if err != nil {
		return r.stepFailed(s, Event{}, fmt.Errorf("instructions: %w", err))
	}
	req := ChatRequest{
		Model: pl.llm.model, Temperature: pl.llm.temperature, MaxOutputTokens: pl.llm.maxOutputTokens, OutputSchema: pl.llm.outputSchema,
		Messages: []ChatMessage{{Role: RoleSystem, Content: system}, {Role: RoleUser, Content: r.userPrompt(prompt)}},
	}
	asked := 0
	badCalls, repaired := false, false
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		if end, err := r.tokenBudget(s); end != nil || err != nil {
			return end, err
		}
		r.llmCalls++
		req.Tools = pl.offered(req.Messages)
		resp, err := r.env.Complete(r.ctx, r.step+1, r.llmCalls, cloneRequest(req))
		if err != nil {
			return r.completionFailed(s, err)
		}
		r.completions++
		ev := Event{Action: s.action, Kind: KindCompletion, Status: StatusOK, Model: pl.llm.model,
			Usage: &Usage{}, FinishReason: resp.FinishReason}
		if resp.Usage != nil {
			*ev.Usage = *resp.Usage
			r.usage.add(*resp.Usage)
		}
		msg := resp.Message
		msg.Role = RoleAssistant

		if len(msg.ToolCalls) == 0 {
			badCalls = false
			value, problem, final := pl.llm.answer(msg.Content, resp.FinishReason)
			switch {
			case problem == "":
				if s.saveAs != "" {
					r.save(s.saveAs, value)
				}
				return nil, r.emit(ev)
			case final:
				return r.llmFailed(s, ev, problem)
			case repaired:
				return r.llmFailed(s, ev, "the answer is still not valid after a repair turn: "+problem)
			}
			repaired = true
			if err := r.emit(ev); err != nil {
				return nil, err
			}
			req.Messages = append(req.Messages, msg, ChatMessage{Role: RoleUser, Content: repairPrompt(problem)})
			continue
		}

		checked, problem := pl.checkCalls(req.Tools, msg.ToolCalls)
		switch {
		case problem != "" && resp.FinishReason == FinishLength:
			return r.llmFailed(s, ev, "the answer was cut off at the output token limit (finish_reason length): "+problem)
		case problem != "" && badCalls:
			return r.llmFailed(s, ev, "a second invalid answer in a row: "+problem)
		}
		badCalls = problem != ""
		if err := r.emit(ev); err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, msg)
		for i, tc := range msg.ToolCalls {
			reply := checked[i].refusal
			if reply == "" {
				if asked >= pl.maxCalls {
					return nil, nil
				}
				asked++
				var end *ending
				reply, end, err = r.planCall(s, tc.ID, checked[i].target, checked[i].args)
				if err != nil || end != nil {
					return end, err
				}
			}
			req.Messages = append(req.Messages, ChatMessage{Role: RoleTool, ToolCallID: tc.ID, Content: reply})
		}
		if asked >= pl.maxCalls {
			return nil, nil
		}
	}
}

// planCall performs one call the model asked for and returns what to tell it.
func (r *runner) planCall(s *cstep, callID string, t target, args map[string]any) (string, *ending, error) {
	out, err := r.toolCall(s, t, args, callID)
	if err != nil || out.end != nil {
		return "", out.end, err
	}
	switch out.status {
	case StatusDenied:
		return toolError("denied: " + out.errMsg), nil, nil
	case StatusError:
		if len(out.result) > 0 {
			return string(out.result), nil, nil
		}
		return toolError(out.errMsg), nil, nil
	}
	if len(out.result) == 0 {
		return "null", nil, nil
	}
	return string(out.result), nil, nil
}

func toolError(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// systemPrompt is the agent's instructions, or a text made from its
// purpose, followed by the output schema when the step has one.
func (r *runner) systemPrompt(lp *llmParams) (string, error) {
	var text string
	if r.p.instructions != nil {
		var err error
		if text, err = r.p.instructions.evalString(r.ctx, r.act); err != nil {
			return "", err
		}
	} else {
		purpose := r.p.def.Purpose
		if purpose == "" {
			purpose = fmt.Sprintf("You are the agent %q.", r.in.Agent)
		}
		text = purpose + "\nUse the functions to reach the goal. When you are done, answer without calling a function."
	}
	if len(lp.outputSchema) > 0 {
		text += "\n\nGive your final answer as only a JSON object, with no other text, that matches this JSON Schema:\n" + string(lp.outputSchema)
	}
	return text, nil
}

// userPrompt is the first user message: the goal, the context when there
// is one, and the step's prompt when it says more than the goal.
func (r *runner) userPrompt(prompt string) string {
	var b strings.Builder
	b.WriteString("Goal: " + r.in.Goal)
	if len(r.act.context) > 0 {
		ctxJSON, _ := json.Marshal(r.act.context)
		b.WriteString("\n\nContext: " + string(ctxJSON))
	}
	if prompt != "" && prompt != r.in.Goal {
		b.WriteString("\n\n" + prompt)
	}
	return b.String()
}

// cloneRequest copies the message list so a Completer that keeps the
// request (to record it) is not affected by later appends.
func cloneRequest(req ChatRequest) ChatRequest {
	req.Messages = append([]ChatMessage(nil), req.Messages...)
	return req
}
