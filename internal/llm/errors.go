package llm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/agent"
	"github.com/agentplane/agentplane/internal/outbound"
	"github.com/agentplane/agentplane/internal/problem"
)

// maxErrorBody bounds what is read of an error response.
const maxErrorBody = 64 << 10

// maxMessage bounds the provider's words kept in an error.
const maxMessage = 1000

// maxAnswer bounds what is read of an answer.
const maxAnswer = 16 << 20

// errTooLarge ends the reading of an answer past maxAnswer.
var errTooLarge = errors.New("its answer is larger than " + outbound.Size(maxAnswer))

// limitedBody reads a body up to maxAnswer bytes, then fails.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

// exchange is what one attempt got back over HTTP, seen beneath any SDK:
// the status and headers of the response, and the body of an error status.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

// capture sends r through next (the HTTP client, or the SDK's middleware
// chain) and fills rec from the answer.
func (rec *exchange) capture(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(r)
	if res == nil {
		return res, err
	}
	rec.status, rec.header = res.StatusCode, res.Header
	if res.StatusCode >= 400 && res.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		_ = res.Body.Close()
		rec.body = b
		res.Body = io.NopCloser(bytes.NewReader(b))
	} else if res.Body != nil {
		res.Body = &limitedBody{ReadCloser: res.Body, left: maxAnswer}
	}
	return res, err
}

// failure is what to do about an attempt that failed.
type failure struct {
	err   *agent.LLMError
	retry bool
	// wait is the wait the model asked for; negative when it named none.
	wait time.Duration
}

// retryable are the statuses a request is sent again after.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// failure classifies the error of an attempt; secret is removed from every
// word that is kept.
func (c *client) failure(err error, rec *exchange, secret string) failure {
	f := failure{wait: -1}
	var le *agent.LLMError
	var pe *problem.Error
	var ne net.Error
	switch {
	case rec.status >= 400:
		msg := providerMessage(rec)
		if rec.status == http.StatusNotFound {
			msg += c.hint404()
		}
		f.err = &agent.LLMError{Status: rec.status, Message: msg}
		f.retry = retryable(rec.status)
		if f.retry {
			if d, ok := retryAfter(rec.header, time.Now()); ok {
				f.wait = d
			}
		}
	case errors.As(err, &le):
		f.err = &agent.LLMError{Status: cmp.Or(le.Status, rec.status), Message: le.Message}
	case errors.As(err, &ne) && ne.Timeout():
		f.err = &agent.LLMError{Message: "the model did not answer within " + seconds(c.model.Timeout) +
			" (its timeout; raise it with the model's timeout, at most 15m)"}
	case errors.As(err, &pe):
		f.err = &agent.LLMError{Message: "the model's address is refused: " + pe.Detail}
	case errors.Is(err, errTooLarge):
		f.err = &agent.LLMError{Status: rec.status, Message: errTooLarge.Error()}
	case rec.status != 0 && errors.Is(err, io.ErrUnexpectedEOF):
		f.err = &agent.LLMError{Status: rec.status, Message: "its answer was cut short (the connection closed before its end)"}
		f.retry = true
	case rec.status != 0:
		f.err = &agent.LLMError{Status: rec.status, Message: "its answer is not a chat completion in JSON (" + mediaType(rec.header) + " body)"}
	default:
		msg := "the model could not be reached at " + c.base.Host + ": " + outbound.Reason(err, c.model.Timeout)
		f.retry = true
		switch {
		case !c.model.HTTP2PriorKnowledge || c.base.Scheme != "http":
		case strings.Contains(err.Error(), "looked like an HTTP/1.1 header"):
			// Go's HTTP/2 client says so when HTTP/1.1 answers its preface:
			// asking again would be answered the same.
			msg = "the model at " + c.base.Host + " answered HTTP/2 in HTTP/1.1: it does not speak HTTP/2 without TLS; turn http2_prior_knowledge off"
			f.retry = false
		default:
			// A server of HTTP/1.1 alone may close the connection before
			// its answer to the preface is read, which leaves only a reset.
			msg += " (with http2_prior_knowledge, which the server must speak; for one that speaks only HTTP/1.1, turn http2_prior_knowledge off)"
		}
		f.err = &agent.LLMError{Message: msg}
	}
	f.err = &agent.LLMError{Status: f.err.Status, Message: redact(f.err.Message, secret)}
	return f
}

// providerMessage is the provider's own words in an error body:
// error.message (OpenAI and Anthropic), else a top-level message or detail
// as compatible servers send, else the status text.
func providerMessage(rec *exchange) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  string          `json:"detail"`
	}
	text := http.StatusText(rec.status)
	if len(bytes.TrimSpace(rec.body)) == 0 {
		return text
	}
	if json.Unmarshal(rec.body, &body) != nil {
		return text + " (" + mediaType(rec.header) + " body, not JSON)"
	}
	var inner struct {
		Message string `json:"message"`
	}
	var plain string
	switch {
	case json.Unmarshal(body.Error, &inner) == nil && inner.Message != "":
		return clip(inner.Message)
	case json.Unmarshal(body.Error, &plain) == nil && plain != "":
		return clip(plain)
	case body.Message != "":
		return clip(body.Message)
	case body.Detail != "":
		return clip(body.Detail)
	}
	return text
}

// mediaType names a response body's media type for an error: "a text/html".
func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt == "" {
		return "an untyped"
	}
	return "a " + mt
}

// clip keeps the start of a long message, on one line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + "…"
	}
	return s
}

// redact removes secret from s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// versionSegment matches an API version path segment: v1, v1beta, v2alpha1.
var versionSegment = regexp.MustCompile(`^v\d+[a-z0-9]*$`)

// hint404 says what a 404 may mean about the model's base_url.
func (c *client) hint404() string {
	segs := strings.Split(strings.Trim(c.base.Path, "/"), "/")
	hasVersion := false
	for _, s := range segs {
		hasVersion = hasVersion || versionSegment.MatchString(s)
	}
	switch c.call.name() {
	case "anthropic":
		if hasVersion {
			return fmt.Sprintf(" (the model's base_url %s names a version; for anthropic it is the API root without /v1, such as https://api.anthropic.com)", c.model.BaseURL)
		}
		return fmt.Sprintf(" (is %q a model id this endpoint serves?)", c.model.Model)
	default:
		if !hasVersion {
			return fmt.Sprintf(" (does base_url end in /v1? %s has no version segment; it is the API root, such as https://api.openai.com/v1)", c.model.BaseURL)
		}
		return fmt.Sprintf(" (is %q a model id this endpoint serves, and base_url its API root?)", c.model.Model)
	}
}

// retryAfter reads the wait a response asks for: retry-after-ms, or
// Retry-After in seconds or as an HTTP-date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || s > 1e9 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// seconds writes a timeout as people set it: "120s", "250ms".
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}
