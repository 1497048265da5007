package main

import (
	"io"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// terminalText is the writer of what the client prints for people: its
// tables, stream lines and errors. Much of that text is third-party (a
// model's answers, a tool's results, an external agent's words and
// errors), so a control character in it other than a line break or a tab
// is printed as its escape (\x1b, \r, \u009b), never handed to the
// terminal to act on: a hostile answer cannot move the cursor, rewrite
// lines already printed, set the window's title or a link, or hide text.
// Bidirectional formatting characters are escaped too, so text cannot be
// shown in an order other than the one it has. -o json and -o yaml are
// left as they are: they are for programs, and encode C0 controls
// (JSON as \u001b, YAML as \e).
type terminalText struct{ w io.Writer }

// terminal wraps w in a terminalText.
func terminal(w io.Writer) io.Writer { return terminalText{w} }

// Write writes p with its control characters escaped. Each of the
// client's writes is whole text (fmt's, the tab writer's), so a rune is
// never cut between two; a byte that is not UTF-8 is escaped as \xNN.
func (t terminalText) Write(p []byte) (int, error) {
	if !needsEscape(p) {
		return t.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for rest := p; len(rest) > 0; {
		r, size := utf8.DecodeRune(rest)
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\x`...)
			out = append(out, hexDigits[rest[0]>>4], hexDigits[rest[0]&15])
		case escaped(r):
			q := strconv.QuoteRuneToASCII(r)
			out = append(out, q[1:len(q)-1]...)
		default:
			out = append(out, rest[:size]...)
		}
		rest = rest[size:]
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

const hexDigits = "0123456789abcdef"

// escaped reports whether r is printed as its escape.
func escaped(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r))
}

// needsEscape reports whether p holds a rune that is escaped or a byte
// that is not UTF-8.
func needsEscape(p []byte) bool {
	for len(p) > 0 {
		if p[0] >= 0x20 && p[0] < 0x7f {
			p = p[1:]
			continue
		}
		r, size := utf8.DecodeRune(p)
		if (r == utf8.RuneError && size == 1) || escaped(r) {
			return true
		}
		p = p[size:]
	}
	return false
}
