package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
)

// CanonicalArgs returns the canonical JSON (CanonicalJSON) of a call's
// arguments, the form in which replay compares calls: two calls are
// identical when tool, operation and canonical arguments are equal. Nil
// arguments are {}.
func CanonicalArgs(args map[string]any) ([]byte, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("marshal args: %w", err)
	}
	out, err := CanonicalJSON(raw)
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

// CanonicalJSON returns the form in which calls and results are compared:
// RFC 8785's, except that an integer the double nearest it does not give
// back keeps its digits (RFC 8785 writes 1234567890123456789 as the double
// 1234567890123456800, the form of 1234567890123456788 too). The
// exception never applies to what json.Marshal writes of a float64 (each
// is the shortest form of its double), so a document of float64s, as
// every call was recorded before arguments kept their digits, has the
// form RFC 8785 gives it, and 1.0, 1 and 1e0 share theirs. What RFC 8785
// refuses (a repeated member, a string that is not UTF-8) is refused with
// or without such an integer.
func CanonicalJSON(raw []byte) ([]byte, error) {
	if !holdsWideInteger(raw) {
		return jcs.Transform(raw)
	}
	// RFC 8785's parse first: the decoder would pass a repeated member
	// (its last value kept, where another reader may keep its first) and
	// a string that is not UTF-8.
	if _, err := jcs.Transform(raw); err != nil {
		return nil, err
	}
	var v any
	if err := decodeNumbers(raw, &v); err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, len(raw)), v)
}

// holdsWideInteger reports whether the JSON text raw holds a number
// wideInteger keeps the digits of.
func holdsWideInteger(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(raw) && strings.IndexByte("0123456789.eE+-", raw[j]) >= 0 {
				j++
			}
			if _, ok := wideInteger(string(raw[i:j])); ok {
				return true
			}
			i = j - 1
		}
	}
	return false
}

// wideInteger returns the digits of the integer the JSON number lit is,
// when the double nearest it, written as briefly as it can be, is another
// number; ok is false for every other number, which RFC 8785's form tells
// apart already (or, past the doubles' range, refuses).
func wideInteger(lit string) (digits string, ok bool) {
	if len(lit) < 16 && !strings.ContainsAny(lit, "eE") {
		return "", false // at most 15 digits: below 2^53, exact
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.Abs(f) < 1<<53 {
		return "", false // every integer below 2^53 is a double
	}
	neg, m, k, ok := decimal(lit)
	if !ok || k < 0 {
		return "", false // not an integer
	}
	_, fm, fk, _ := decimal(strconv.FormatFloat(f, 'e', -1, 64))
	if m == fm && k == fk {
		return "", false
	}
	// The double is finite, so k is at most 308.
	digits = m + strings.Repeat("0", k)
	if neg {
		digits = "-" + digits
	}
	return digits, true
}

// decimal splits the number lit into its significant digits m (no zero
// first or last) and the power of ten k they are multiplied by.
func decimal(lit string) (neg bool, m string, k int, ok bool) {
	lit, neg = strings.CutPrefix(lit, "-")
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		var err error
		if k, err = strconv.Atoi(lit[i+1:]); err != nil {
			return false, "", 0, false
		}
		lit = lit[:i]
	}
	whole, frac, _ := strings.Cut(lit, ".")
	all := whole + frac
	m = strings.TrimRight(all, "0")
	k += len(all) - len(m) - len(frac)
	return neg, strings.TrimLeft(m, "0"), k, true
}

// appendCanonical appends v, decoded with numbers as json.Number, in the
// form CanonicalJSON gives it: RFC 8785's members order, strings and
// numbers, but for wideInteger's.
func appendCanonical(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendCanonicalString(b, x), nil
	case json.Number:
		if digits, ok := wideInteger(string(x)); ok {
			return append(b, digits...), nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number out of range: %.32s", x)
		}
		n, err := jcs.NumberToJSON(f)
		if err != nil {
			return nil, err
		}
		return append(b, n...), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// RFC 8785 orders members by their names' UTF-16 code units.
		slices.SortFunc(keys, func(p, q string) int {
			return slices.Compare(utf16.Encode([]rune(p)), utf16.Encode([]rune(q)))
		})
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendCanonicalString(b, k), ':')
			var err error
			if b, err = appendCanonical(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("%T is not a decoded JSON value", v)
}

// appendCanonicalString appends s quoted as RFC 8785 writes a string: the
// two-character escapes, \u00xx for the other control characters, every
// other character as itself.
func appendCanonicalString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if c < 0x20 {
				b = append(b, `\u00`...)
				b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}
