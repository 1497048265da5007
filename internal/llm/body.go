package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/agentplane/agentplane/internal/llm/wire"
)

// Wire APIs the run gateway relays.
const (
	ChatCompletions = wire.ChatCompletions // POST {base_url}/chat/completions
	Responses       = wire.Responses       // POST {base_url}/responses
	Messages        = wire.Messages        // POST {base_url}/v1/messages, as anthropic-sdk-go builds it
)

// errNotObject is the error of a body that is not one JSON object.
var errNotObject = errors.New("not a JSON object")

// span is the byte range of a member's value in a JSON object.
type span struct{ start, end int }

// members returns where each member's value lies in the JSON object obj
// (for a key given twice, the last, as decoders read it).
func members(obj []byte) (map[string]span, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	out := map[string]span{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errNotObject
		}
		end := int(dec.InputOffset())
		out[key] = span{end - len(raw), end}
	}
	if _, err := dec.Token(); err != nil {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return out, nil
}

// setMember returns obj with the value of key replaced by value, or with
// key added first when obj has none; every other byte is kept.
func setMember(obj []byte, key string, value []byte) ([]byte, error) {
	ms, err := members(obj)
	if err != nil {
		return nil, err
	}
	return withMember(obj, ms, key, value), nil
}

// withMember is setMember of obj whose members ms are.
func withMember(obj []byte, ms map[string]span, key string, value []byte) []byte {
	var out []byte
	if s, ok := ms[key]; ok {
		out = make([]byte, 0, len(obj)-(s.end-s.start)+len(value))
		out = append(out, obj[:s.start]...)
		out = append(out, value...)
		return append(out, obj[s.end:]...)
	}
	open := bytes.IndexByte(obj, '{') + 1
	k, _ := json.Marshal(key)
	out = make([]byte, 0, len(obj)+len(k)+len(value)+2)
	out = append(out, obj[:open]...)
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, value...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	return append(out, obj[open:]...)
}

// member is the value of key in obj, nil when absent.
func member(obj []byte, ms map[string]span, key string) []byte {
	s, ok := ms[key]
	if !ok {
		return nil
	}
	return obj[s.start:s.end]
}

// relayBody is an agent's request body made ready to send.
type relayBody struct {
	body []byte
	// stream is the body's "stream": true.
	stream bool
	// usageAdded says include_usage was added to a streamed chat
	// completion that did not ask for it: its usage chunk is not passed on.
	usageAdded bool
}

// prepareBody replaces body's model with the provider's model id and, for
// a streamed chat completion, asks for its usage.
func prepareBody(api string, body []byte, providerModel string) (relayBody, error) {
	ms, err := members(body)
	if err != nil {
		return relayBody{}, err
	}
	rb := relayBody{stream: string(member(body, ms, "stream")) == "true"}
	id, _ := json.Marshal(providerModel)
	rb.body = withMember(body, ms, "model", id)
	if api != ChatCompletions || !rb.stream {
		return rb, nil
	}
	opts := member(body, ms, "stream_options")
	if len(opts) == 0 || string(opts) == "null" {
		opts = []byte("{}")
	}
	oms, err := members(opts)
	if err != nil {
		return relayBody{}, err
	}
	if string(member(opts, oms, "include_usage")) == "true" {
		return rb, nil
	}
	opts = withMember(opts, oms, "include_usage", []byte("true"))
	rb.usageAdded = true
	rb.body, err = setMember(rb.body, "stream_options", opts)
	return rb, err
}

// readEvents reads a text/event-stream and calls fn with each event: its
// lines as received, without the blank line that ends it (nor the last
// line's end). A stream ending inside an event is io.ErrUnexpectedEOF.
func readEvents(r io.Reader, fn func(event []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev []byte
	for {
		line, err := br.ReadBytes('\n')
		switch {
		case len(line) > 0 && len(bytes.TrimRight(line, "\r\n")) == 0 && line[len(line)-1] == '\n':
			if len(ev) > 0 {
				ev = bytes.TrimSuffix(bytes.TrimSuffix(ev, []byte("\n")), []byte("\r"))
				if err := fn(ev); err != nil {
					return err
				}
				ev = nil
			}
		default:
			ev = append(ev, line...)
		}
		if err == io.EOF {
			if len(bytes.TrimSpace(ev)) > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ErrorBody is an error answer in the shape api's SDKs parse: OpenAI's
// {"error": {"message", "type", "code", "param"}} or Anthropic's
// {"type": "error", "error": {"type", "message"}}, its type from status.
// code is OpenAI's error code (null when empty); Anthropic's shape has
// none.
func ErrorBody(api string, status int, message, code string) []byte {
	if api == Messages {
		type detail struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		b, _ := json.Marshal(struct {
			Type  string `json:"type"`
			Error detail `json:"error"`
		}{"error", detail{anthropicErrorType(status), message}})
		return b
	}
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: message, Type: openAIErrorType(status)}
	if code != "" {
		d.Code = &code
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{d})
	return b
}

// openAIErrorType is the error type OpenAI gives a status.
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// anthropicErrorType is the error type Anthropic gives a status.
func anthropicErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}
