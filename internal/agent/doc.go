// Package agent compiles agent definitions and runs them.
//
// A Definition (JSON; the CLI converts YAML to it) lists the tools an agent
// may call, the JSON Schema of an invocation's context, CEL policy rules per
// policy class, the model plan steps use, and the steps to run. Compile
// checks a definition against a ToolCatalog (the tenant's tools and the
// names of its models) once, at deploy time, and returns a Program whose CEL
// expressions are already parsed, type-checked and planned under a cost
// limit; evaluating one takes microseconds.
//
// A Program runs through Run, which yields one Event per emitted step: call,
// score, route, set and finish steps emit one each, goto none, plan one per
// completion (kind completion: model, tokens, finish reason) and one per
// tool call it makes, and a step whose `when` is false emits nothing and
// takes no step number. Before every tool call the engine checks, in order,
// the caller's scope (`tool:<name>` or `tool:*`), the policy rule of the
// tool's policy class, and the invocation's max_tool_calls.
//
// The package does no I/O of its own. Tool calls and LLM completions go
// through Env, and the engine is deterministic given Env's answers: the same
// Program, Input and Env answers always produce the same events, in the same
// order, with the same step numbers. Everything else follows from that:
//
//   - a live run uses an Env that really calls tools and the LLM;
//   - crash-resume uses an Env that serves the recorded answer for every
//     step up to the last recorded one (and for completions by their
//     ordinal), while the caller drops the events it has already stored;
//     the run then continues live from the first unrecorded step;
//   - replay uses an Env that serves the recorded response for a call
//     identical (tool, operation, CanonicalArgs) to a recorded one, in order,
//     and answers StatusUnrecorded for any other call, so the target version
//     runs on and its consequences show in the diff.
//
// The package knows nothing of storage or HTTP; the workflow and HTTP layers
// wire it to both.
package agent
