package agent

import (
	"context"
	"encoding/json"
	"testing"
)

const threeCallsDef = `{
  "tools": ["payments", "cases"],
  "policies": {"financial": {"allow": "!has(args.amount) || args.amount <= 5000.0 || 'payments:large' in caller.scopes"}},
  "steps": [
    {"action": "fetch_transaction", "call": "payments.getTransaction", "args": {"id": "context.transaction_id"}, "save_as": "txn"},
    {"action": "fraud_score", "score": "txn.amount > 1000.0 ? 0.91 : 0.12"},
    {"action": "route_queue", "route": [{"when": "score >= 0.8", "queue": "fraud-review"}, {"queue": "standard"}]},
    {"action": "refund", "call": "payments.refund", "args": {"amount": "txn.amount"}},
    {"action": "open_case", "call": "cases.createCase", "args": {"transaction": "txn.id", "queue": "queue"}}
  ],
  "outcome": "queue == 'fraud-review' ? 'escalated' : 'cleared'",
  "output": "{'queue': queue, 'score': score}"
}`

// instantEnv answers every call at once with a fixed result.
type instantEnv struct {
	NoPlanner
	NoDecisions
}

var instantResult = json.RawMessage(`{"id":"tx_1","amount":1500}`)

func (instantEnv) Call(context.Context, int, ToolCall) (CallResult, error) {
	return CallResult{Status: StatusOK, Result: instantResult}, nil
}

// BenchmarkRunThreeCalls measures the engine alone: three checked tool
// calls (one under a policy rule), a score and a route, outcome and output.
func BenchmarkRunThreeCalls(b *testing.B) {
	p := mustCompile(b, parseDef(b, threeCallsDef))
	in := fraudInput("tool:*")
	ctx := context.Background()
	b.ReportAllocs()
	steps := 0
	for b.Loop() {
		events, res, err := p.Execute(ctx, in, instantEnv{})
		if err != nil || res.Outcome != "escalated" {
			b.Fatalf("outcome %q, err %v", res.Outcome, err)
		}
		steps += len(events)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
}
