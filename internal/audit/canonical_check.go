package audit

import "unicode/utf8"

// isCanonical reports whether b is already RFC 8785 canonical JSON, for a
// subset of JSON that covers what records' details hold: objects with
// printable ASCII keys, arrays, strings, integers of at most 15 digits,
// true, false and null, without whitespace. Anything else (fractions,
// exponents, other escapes or key characters) answers false and goes
// through the general canonicaliser, so a true answer is always right; the
// fast path only saves re-encoding what json.Marshal wrote canonically.
func isCanonical(b []byte) bool {
	c := checker{b: b}
	return c.value(0) && c.i == len(b)
}

// maxCanonicalDepth bounds the nesting the check follows.
const maxCanonicalDepth = 32

type checker struct {
	b []byte
	i int
}

func (c *checker) peek() byte {
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

func (c *checker) literal(s string) bool {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return false
	}
	c.i += len(s)
	return true
}

func (c *checker) value(depth int) bool {
	if depth > maxCanonicalDepth {
		return false
	}
	switch ch := c.peek(); {
	case ch == '{':
		return c.object(depth)
	case ch == '[':
		return c.array(depth)
	case ch == '"':
		_, ok := c.string(false)
		return ok
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.integer()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	}
	return false
}

func (c *checker) object(depth int) bool {
	c.i++ // {
	if c.peek() == '}' {
		c.i++
		return true
	}
	var prev []byte
	for first := true; ; first = false {
		key, ok := c.string(true)
		if !ok {
			return false
		}
		// Printable ASCII keys: byte order is UTF-16 code unit order.
		if !first && string(prev) >= string(key) {
			return false
		}
		prev = key
		if c.peek() != ':' {
			return false
		}
		c.i++
		if !c.value(depth + 1) {
			return false
		}
		switch c.peek() {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

func (c *checker) array(depth int) bool {
	c.i++ // [
	if c.peek() == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth + 1) {
			return false
		}
		switch c.peek() {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

// string checks a string as RFC 8785 writes it and returns its raw
// contents. A key must be printable ASCII without escapes.
func (c *checker) string(key bool) ([]byte, bool) {
	if c.peek() != '"' {
		return nil, false
	}
	c.i++
	start := c.i
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			s := c.b[start:c.i]
			c.i++
			return s, true
		case key && (ch < 0x20 || ch >= 0x7f || ch == '\\'):
			return nil, false
		case ch < 0x20:
			return nil, false
		case ch == '\\':
			if !c.escape() {
				return nil, false
			}
		case ch < utf8.RuneSelf:
			c.i++
		default:
			r, size := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			c.i += size
		}
	}
	return nil, false
}

// escape accepts the escapes RFC 8785 writes: \" \\ \b \f \n \r \t, and
// \u00xx (lower-case hex) for the other control characters.
func (c *checker) escape() bool {
	if c.i+1 >= len(c.b) {
		return false
	}
	switch c.b[c.i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		c.i += 2
		return true
	case 'u':
		if len(c.b)-c.i < 6 || string(c.b[c.i+2:c.i+4]) != "00" {
			return false
		}
		hi, lo := c.b[c.i+4], c.b[c.i+5]
		if hi != '0' && hi != '1' || !(lo >= '0' && lo <= '9' || lo >= 'a' && lo <= 'f') {
			return false
		}
		switch v := (hi-'0')<<4 | hexValue(lo); v {
		case '\b', '\f', '\n', '\r', '\t':
			return false // these have short forms
		}
		c.i += 6
		return true
	}
	return false
}

func hexValue(h byte) byte {
	if h <= '9' {
		return h - '0'
	}
	return h - 'a' + 10
}

// integer accepts an integer as ES6 prints it, of at most 15 digits (so it
// is exact as a float64): no leading zeros, no "-0".
func (c *checker) integer() bool {
	neg := c.peek() == '-'
	if neg {
		c.i++
	}
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	digits := c.b[start:c.i]
	switch {
	case len(digits) == 0 || len(digits) > 15:
		return false
	case digits[0] == '0' && (len(digits) > 1 || neg):
		return false
	}
	switch c.peek() {
	case '.', 'e', 'E':
		return false
	}
	return true
}
