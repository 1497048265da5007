package audit

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// canonical writes the record without its hash as RFC 8785 JSON, directly:
// the record's members are fixed, so their sorted order is too, and only
// details (caller-provided JSON) needs the general canonicaliser. This is
// the hot path of every append, so it avoids reflection and maps, and
// details already canonical (as json.Marshal writes most) are used as they
// are.
func (r *Record) canonical() ([]byte, error) {
	details := r.Details
	if len(details) == 0 {
		details = []byte("{}")
	}
	cd := details
	if !isCanonical(details) {
		var err error
		if cd, err = jcs.Transform(details); err != nil {
			return nil, fmt.Errorf("canonicalize audit details: %w", err)
		}
	}
	b := make([]byte, 0, 512+len(cd))
	// Members in RFC 8785 order (UTF-16 code units; all ASCII here).
	b = append(b, `{"action":`...)
	b = appendString(b, r.Action)
	b = append(b, `,"actor":{"client_id":`...)
	b = appendString(b, r.Actor.ClientID)
	b = append(b, `,"sub":`...)
	b = appendString(b, r.Actor.Sub)
	b = append(b, `},"details":`...)
	b = append(b, cd...)
	b = append(b, `,"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"outcome":`...)
	b = appendString(b, r.Outcome)
	b = append(b, `,"prev_hash":`...)
	b = appendString(b, r.PrevHash)
	b = append(b, `,"request_id":`...)
	b = appendString(b, r.RequestID)
	b = append(b, `,"resource":{"id":`...)
	b = appendString(b, r.Resource.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, r.Resource.Type)
	b = append(b, `},"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"tenant":`...)
	b = appendString(b, r.Tenant)
	b = append(b, `,"time":`...)
	b = appendString(b, r.Time.UTC().Format(TimeFormat))
	b = append(b, `,"trace_id":`...)
	b = appendString(b, r.TraceID)
	if r.WorkflowID != "" {
		b = append(b, `,"workflow_id":`...)
		b = appendString(b, r.WorkflowID)
	}
	return append(b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as an RFC 8785 string: only '"', '\\' and control
// characters are escaped (with the short forms where JSON has them), every
// other character is written as is; invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, '\\', '"')
			case c == '\\':
				b = append(b, '\\', '\\')
			case c >= 0x20:
				b = append(b, c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
