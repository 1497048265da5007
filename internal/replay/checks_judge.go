package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/model"
)

// Judge scores a replay 0..1 against a rubric: the seam of the LLM-as-judge
// check. ChatJudge is the implementation over a chat model; tests script one.
type Judge interface {
	Judge(ctx context.Context, req JudgeRequest) (JudgeAnswer, error)
}

// JudgeRequest is one replay to score.
type JudgeRequest struct {
	Tenant, Model, Rubric string
	Original, Replay      Side
	Expected              *Expectation
}

// JudgeAnswer is a judge's score (0..1), its reason, and the exchange that
// gave them.
type JudgeAnswer struct {
	Score  float64
	Reason string
	Record JudgeRecord
}

// JudgeRecord is a judge model's exchange as a check result keeps it: the
// request and response as sent and received, without credentials, and the
// tokens they cost.
type JudgeRecord struct {
	Model    string          `json:"model"`
	Request  json.RawMessage `json:"request,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	Usage    *agent.Usage    `json:"usage,omitempty"`
}

func (c *Checks) runJudge(ctx context.Context, k Case) CheckResult {
	j := c.spec.Judge
	res := CheckResult{Name: CheckJudge}
	if c.judge == nil {
		res.Error = "this server has no judge"
		return res
	}
	ans, err := c.judge.Judge(ctx, JudgeRequest{Tenant: k.Tenant, Model: j.Model, Rubric: j.Rubric,
		Original: k.Original, Replay: k.Replay, Expected: k.Expected})
	if ans.Record.Model != "" || len(ans.Record.Request) > 0 {
		rec := ans.Record
		res.Judge = &rec
	}
	if err != nil {
		res.Error = "the judge failed: " + err.Error()
		return res
	}
	if math.IsNaN(ans.Score) || ans.Score < 0 || ans.Score > 1 {
		res.Error = fmt.Sprintf("the judge gave the score %v, outside 0..1", ans.Score)
		return res
	}
	pass := DefaultPassScore
	if j.PassScore != nil {
		pass = *j.PassScore
	}
	score := ans.Score
	res.Score, res.Reason, res.Passed = &score, ans.Reason, score >= pass
	return res
}

// ChatJudge is a Judge over a chat model: the rubric is the system message,
// the case the user message, and the answer an object {score, reason}
// (structured output where the provider has it).
type ChatJudge struct {
	// Complete asks the tenant's model named in req.Model for a completion.
	Complete func(ctx context.Context, tenant string, req agent.ChatRequest) (agent.ChatResponse, error)
	// Models, when set, lets a batch naming a model the tenant lacks be
	// refused at submission (CheckModel).
	Models model.Lookup
}

// ModelChecker is a Judge that can tell at submission whether the tenant
// has the model a judge check names.
type ModelChecker interface {
	CheckModel(ctx context.Context, tenant, name string) error
}

// CheckModel reports problem.NotFound when the tenant has no such model.
func (j ChatJudge) CheckModel(ctx context.Context, tenant, name string) error {
	if j.Models == nil {
		return nil
	}
	_, err := j.Models.Model(ctx, tenant, name)
	return err
}

// JudgeAgent is the agent a judge's tokens are counted under in the
// tenant's usage: no agent can have the name.
const JudgeAgent = "(judge)"

// ModelJudge is the ChatJudge over the tenant's registered models, asked
// through live (the workflow runner's model path): within the model's
// daily budget, counted in the tenant's usage under JudgeAgent. What the
// server wires.
func ModelJudge(models model.Lookup, live LiveCompleter) ChatJudge {
	return ChatJudge{Models: models, Complete: func(ctx context.Context, tenant string, req agent.ChatRequest) (agent.ChatResponse, error) {
		resp, _, err := live.LiveCompletion(ctx, tenant, JudgeAgent, req)
		return resp, err
	}}
}

// judgeSchema is the JSON Schema of the judge's answer.
var judgeSchema = json.RawMessage(`{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1},` +
	`"reason":{"type":"string"}},"required":["score","reason"],"additionalProperties":false}`)

const judgeInstructions = `You judge a replay of an AI agent's run against the original run.
Score how well the replay meets the rubric, from 0 (not at all) to 1 (fully), and say why in one or two sentences.
Answer with a JSON object {"score": <number 0..1>, "reason": <string>} and nothing else.

Rubric:
`

// Judge asks the model to score the case.
func (j ChatJudge) Judge(ctx context.Context, req JudgeRequest) (JudgeAnswer, error) {
	body, err := json.Marshal(map[string]any{"original": req.Original, "replay": req.Replay, "expected": req.Expected})
	if err != nil {
		return JudgeAnswer{}, fmt.Errorf("encode the case: %w", err)
	}
	zero := 0.0
	chat := agent.ChatRequest{Model: req.Model, Temperature: &zero, MaxOutputTokens: 512, OutputSchema: judgeSchema,
		Messages: []agent.ChatMessage{
			{Role: agent.RoleSystem, Content: judgeInstructions + req.Rubric},
			{Role: agent.RoleUser, Content: string(body)},
		}}
	ans := JudgeAnswer{Record: JudgeRecord{Model: req.Model}}
	ans.Record.Request, _ = json.Marshal(chat)
	resp, err := j.Complete(ctx, req.Tenant, chat)
	if err != nil {
		return ans, err
	}
	ans.Record.Response, _ = json.Marshal(resp)
	ans.Record.Usage = resp.Usage
	var out struct {
		Score  *float64 `json:"score"`
		Reason string   `json:"reason"`
	}
	text := strings.TrimSpace(resp.Message.Content)
	text = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(text, "```json"), "```"), "```")
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &out); err != nil || out.Score == nil {
		return ans, errors.New(`the judge's answer is not {"score": 0..1, "reason": "…"}`)
	}
	ans.Score, ans.Reason = *out.Score, out.Reason
	return ans, nil
}
