package agent

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/agentplane/agentplane/internal/memo"
)

// canonical writes the canonical JSON of r, the bytes CanonicalJSON
// makes of json.Marshal(r), without encoding r and parsing it again: the
// members in the order JCS sorts them, strings as json.Marshal reads them
// (an invalid UTF-8 byte is U+FFFD) and JCS writes them, numbers in JCS's
// ES6 form but for an integer its double does not give back (wideInteger),
// and each JSON Schema canonicalized once (schemas) however many requests
// carry it. ok is false for what the encoder would refuse or write
// otherwise (a number that is not finite, a schema that is not valid
// JSON): Hash then takes the long way, whose answer (or error) is the
// reference.
func (r *ChatRequest) canonical() (out []byte, ok bool) {
	b := make([]byte, 0, 1024)
	b = append(b, '{')
	comma := false
	member := func(name string) {
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	// max_output_tokens < messages < model < output_schema < temperature < tools
	if r.MaxOutputTokens != 0 {
		member("max_output_tokens")
		n := strconv.FormatInt(r.MaxOutputTokens, 10)
		if _, wide := wideInteger(n); !wide {
			var err error
			if n, err = jcs.NumberToJSON(float64(r.MaxOutputTokens)); err != nil {
				return nil, false
			}
		}
		b = append(b, n...)
	}
	member("messages")
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMessage(b, &r.Messages[i])
		}
		b = append(b, ']')
	}
	if r.Model != "" {
		member("model")
		b = appendString(b, r.Model)
	}
	if len(r.OutputSchema) > 0 {
		member("output_schema")
		s := schemas.Get(r.OutputSchema, canonicalSchema)
		if s == nil {
			return nil, false
		}
		b = append(b, s...)
	}
	if r.Temperature != nil {
		member("temperature")
		n, err := jcs.NumberToJSON(*r.Temperature)
		if err != nil {
			return nil, false
		}
		b = append(b, n...)
	}
	if len(r.Tools) > 0 {
		member("tools")
		b = append(b, '[')
		for i, t := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			// description < name < parameters
			b = append(b, '{')
			if t.Description != "" {
				b = append(b, `"description":`...)
				b = appendString(b, t.Description)
				b = append(b, ',')
			}
			b = append(b, `"name":`...)
			b = appendString(b, t.Name)
			b = append(b, `,"parameters":`...)
			if t.Parameters == nil {
				b = append(b, "null"...)
			} else {
				s := schemas.Get(t.Parameters, canonicalSchema)
				if s == nil {
					return nil, false
				}
				b = append(b, s...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// appendMessage appends m's members in JCS's order: content < role <
// tool_call_id < tool_calls.
func appendMessage(b []byte, m *ChatMessage) []byte {
	b = append(b, '{')
	if m.Content != "" {
		b = append(b, `"content":`...)
		b = appendString(b, m.Content)
		b = append(b, ',')
	}
	b = append(b, `"role":`...)
	b = appendString(b, m.Role)
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendString(b, m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			// arguments < id < name
			b = append(b, `{"arguments":`...)
			b = appendString(b, c.Arguments)
			b = append(b, `,"id":`...)
			b = appendString(b, c.ID)
			b = append(b, `,"name":`...)
			b = appendString(b, c.Name)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendString appends s as JCS writes the string json.Marshal made of
// it: each invalid UTF-8 byte as U+FFFD, the two-character escapes for
// \\ " \b \f \n \r \t, \u00xx for the other control characters, and
// everything else as it is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0')
				h := strconv.FormatUint(uint64(c), 16)
				if len(h) == 1 {
					b = append(b, '0')
				}
				b = append(b, h...)
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}

// schemas remembers the canonical JSON of the schemas requests carry (a
// version's tools, its output schema); nil for one that json.Marshal or
// CanonicalJSON would refuse.
var schemas memo.ByBytes[[]byte]

// canonicalSchema is raw's canonical JSON, as json.Marshal then
// CanonicalJSON make it of a json.RawMessage, or nil.
func canonicalSchema(raw []byte) []byte {
	if !json.Valid(raw) {
		return nil
	}
	s, err := CanonicalJSON(raw)
	if err != nil {
		return nil
	}
	return s
}
