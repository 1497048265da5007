package agent

import (
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// CanonicalArgs returns the RFC 8785 canonical JSON of a call's arguments,
// the form in which replay compares calls: two calls are identical when
// tool, operation and canonical arguments are equal. Nil arguments are {}.
func CanonicalArgs(args map[string]any) ([]byte, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("marshal args: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize args: %w", err)
	}
	return out, nil
}

// Key returns the canonical identity of a call: tool, operation and
// canonical arguments, separated by newlines.
func (c ToolCall) Key() (string, error) {
	args, err := CanonicalArgs(c.Args)
	if err != nil {
		return "", err
	}
	return CallKey(c.Tool, c.Operation, args), nil
}

// CallKey is the key of a call to tool's operation with arguments already
// in canonical form (CanonicalArgs).
func CallKey(tool, operation string, canonicalArgs []byte) string {
	return tool + "\n" + operation + "\n" + string(canonicalArgs)
}
