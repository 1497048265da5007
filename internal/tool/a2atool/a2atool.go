// Package a2atool registers remote A2A agents as tools (type a2a): the
// agent card at spec_url is the document, each skill an operation of kind
// write taking {message, data?}, and a call a blocking SendMessage over the
// card's JSON-RPC interface of protocol 1.0 (docs/a2a.md).
package a2atool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// Version is the protocol version a tool's agent must speak.
const Version = wire.Version

// MaxSkills bounds the skills one card may list.
const MaxSkills = 1000

// card is the part of an agent card that makes operations.
type card struct {
	ProtocolVersion     string                `json:"protocolVersion"` // 0.3 cards only
	SupportedInterfaces []wire.AgentInterface `json:"supportedInterfaces"`
	Skills              []wire.AgentSkill     `json:"skills"`
	DefaultInputModes   []string              `json:"defaultInputModes"`
	DefaultOutputModes  []string              `json:"defaultOutputModes"`
}

// InputSchema is every skill's input: the message's text, and the data
// part sent with it.
var InputSchema = json.RawMessage(`{"type":"object","required":["message"],"additionalProperties":false,"properties":{` +
	`"message":{"type":"string","minLength":1,"description":"the text of the message sent to the remote agent"},` +
	`"data":{"type":"object","description":"sent as the message's data part"}}}`)

// Importer turns an agent card into operations.
type Importer struct{}

// Import implements tool.Importer.
func (Importer) Import(_ context.Context, src tool.Source) (*tool.Spec, error) {
	var c card
	if err := json.Unmarshal(src.Data, &c); err != nil {
		return nil, problem.New(problem.SpecInvalid, "the document is not an A2A agent card: %v", err)
	}
	endpoint := ""
	for _, i := range c.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, wire.BindingJSONRPC) && strings.HasPrefix(i.ProtocolVersion, Version) && i.URL != "" {
			endpoint = i.URL
			break
		}
	}
	if endpoint == "" {
		if c.ProtocolVersion != "" && len(c.SupportedInterfaces) == 0 {
			return nil, problem.New(problem.SpecInvalid, "the agent card is of A2A %s: agentplane calls agents of A2A %s", c.ProtocolVersion, Version)
		}
		return nil, problem.New(problem.SpecInvalid, "the agent card lists no JSONRPC interface of A2A %s in supportedInterfaces", Version)
	}
	if len(c.Skills) > MaxSkills {
		return nil, problem.New(problem.SpecTooLarge, "the agent card lists more than %d skills", MaxSkills)
	}
	spec := &tool.Spec{BaseURL: endpoint}
	seen := map[string]bool{}
	for i, s := range c.Skills {
		if s.ID == "" || seen[s.ID] {
			spec.Warnings = append(spec.Warnings, fmt.Sprintf("skills[%d]: a skill without an id, or listed twice (%q), is left out", i, s.ID))
			continue
		}
		seen[s.ID] = true
		op := tool.Operation{ID: s.ID, Kind: tool.Write, Summary: s.Name, Description: s.Description,
			Input: InputSchema, A2A: &tool.A2ABinding{Skill: s.ID, InputModes: or(s.InputModes, c.DefaultInputModes),
				OutputModes: or(s.OutputModes, c.DefaultOutputModes)}}
		if op.Summary == "" {
			op.Summary = tool.FirstLine(s.Description)
		}
		spec.Operations = append(spec.Operations, op)
	}
	if len(spec.Operations) == 0 {
		return nil, problem.New(problem.SpecInvalid, "the agent card lists no skill")
	}
	return spec, nil
}

// or is a skill's modes, else the card's.
func or(modes, defaults []string) []string {
	if len(modes) > 0 {
		return modes
	}
	return defaults
}
