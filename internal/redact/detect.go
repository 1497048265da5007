package redact

import (
	"math/big"
	"net/netip"
	"regexp"
	"strings"
)

// tokenRE matches a replacement, which no detector looks into.
var tokenRE = regexp.MustCompile(`\[redacted:[a-z_]+:[0-9a-f]{8}\]`)

var (
	emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,63}`)
	// cardRE is a run of 13 to 19 digits, single spaces or dashes between.
	cardRE = regexp.MustCompile(`\d(?:[ -]?\d){12,18}`)
	// ibanRE is a country code, two check digits and 11 to 30 letters or
	// digits, in groups separated by single spaces.
	ibanRE = regexp.MustCompile(`[A-Z]{2}\d{2}(?: ?[A-Za-z0-9]){11,30}`)
	// Phone numbers: international (E.164, a leading +, separators
	// between groups), North American with an area code in parentheses
	// or dashed 3-3-4, and national forms with a trunk 0 and spaced groups.
	phoneRE = regexp.MustCompile(`\+[1-9]\d{0,3}(?:[ .-]?\(?\d{1,5}\)?){2,6}` +
		`|\([2-9]\d{2}\) ?[2-9]\d{2}[-. ]\d{4}` +
		`|[2-9]\d{2}-[2-9]\d{2}-\d{4}` +
		`|0[1-9]\d{1,3} \d{3,4} ?\d{3,4}`)
	ipv4RE = regexp.MustCompile(`\d{1,3}(?:\.\d{1,3}){3}`)
	ipv6RE = regexp.MustCompile(`(?:[0-9A-Fa-f]{0,4}:){2,6}\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}`)
)

// mayHold reports whether s has what a match of kind needs (an @, enough
// digits, a dot or colon): most strings have not, and skip the pattern.
func mayHold(kind, s string) bool {
	digits := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits++
		}
	}
	switch kind {
	case Email:
		return strings.IndexByte(s, '@') > 0
	case PaymentCard:
		return digits >= 13
	case IBAN:
		return digits >= 4 && len(s) >= 15
	case Phone:
		return digits >= 7
	case IPAddress:
		return digits >= 1 && strings.ContainsAny(s, ".:")
	}
	return false
}

// detect masks what the detector kind finds in s.
func (m *Masker) detect(kind, s string) string {
	if !mayHold(kind, s) {
		return s
	}
	var (
		re    *regexp.Regexp
		check func(s string, start, end int) (norm string, ok bool)
	)
	switch kind {
	case Email:
		re, check = emailRE, checkEmail
	case PaymentCard:
		re, check = cardRE, checkCard
	case IBAN:
		re, check = ibanRE, checkIBAN
	case Phone:
		re, check = phoneRE, checkPhone
	case IPAddress:
		if strings.Contains(s, ":") {
			s = m.replace(s, ipv6RE, IPAddress, checkIP)
		}
		re, check = ipv4RE, checkIPv4
	default:
		return s
	}
	return m.replace(s, re, kind, check)
}

// replace masks each match of re that check accepts; check may shorten
// a match from its end (an IBAN is as long as its country says).
func (m *Masker) replace(s string, re *regexp.Regexp, kind string, check func(s string, start, end int) (string, bool)) string {
	locs := re.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	at := 0
	for _, l := range locs {
		norm, ok := check(s, l[0], l[1])
		if !ok {
			continue
		}
		end := l[1]
		if kind == IBAN {
			end = l[0] + ibanSpan(s[l[0]:l[1]], len(norm))
		}
		b.WriteString(s[at:l[0]])
		b.WriteString(m.Token(kind, norm))
		m.masked++
		at = end
	}
	if at == 0 {
		return s
	}
	b.WriteString(s[at:])
	return b.String()
}

// wordChar reports whether s has a letter or digit at i: a match touching
// one is part of a longer word or number.
func wordChar(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func checkEmail(s string, start, end int) (string, bool) {
	return strings.ToLower(s[start:end]), true
}

func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// checkCard accepts 13 to 19 digits passing the Luhn check, standing alone.
func checkCard(s string, start, end int) (string, bool) {
	if wordChar(s, start-1) || wordChar(s, end) {
		return "", false
	}
	d := digits(s[start:end])
	if len(d) < 13 || len(d) > 19 || !luhn(d) {
		return "", false
	}
	return d, true
}

// luhn reports whether the digits pass the Luhn (mod 10) check.
func luhn(d string) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			if n *= 2; n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

// ibanLength is the length of an IBAN by country (ISO 13616 registry).
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
	"JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
	"MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
	"NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
	"SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// checkIBAN accepts an IBAN of its country's length passing the mod-97
// check; the match may run on into the next word, so only the country's
// length of characters is taken.
func checkIBAN(s string, start, end int) (string, bool) {
	if wordChar(s, start-1) {
		return "", false
	}
	compact := strings.ToUpper(strings.ReplaceAll(s[start:end], " ", ""))
	n, ok := ibanLength[compact[:2]]
	if !ok || len(compact) < n {
		return "", false
	}
	compact = compact[:n]
	if wordChar(s, start+ibanSpan(s[start:end], n)) {
		return "", false
	}
	return compact, ibanValid(compact)
}

// ibanSpan is how many bytes of s hold its first n non-space characters.
func ibanSpan(s string, n int) int {
	for i := range len(s) {
		if s[i] != ' ' {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// ibanValid checks the ISO 13616 mod-97 checksum of a compact IBAN.
func ibanValid(iban string) bool {
	moved := iban[4:] + iban[:4]
	var num strings.Builder
	for _, c := range moved {
		switch {
		case c >= '0' && c <= '9':
			num.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			num.WriteString(big.NewInt(int64(c - 'A' + 10)).String())
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(num.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

// checkPhone accepts a phone-shaped match standing alone, with 7 to 15
// digits (E.164's most); an order number such as ORD-555-123-4567 or a
// run of digits without a + or phone grouping is not one.
func checkPhone(s string, start, end int) (string, bool) {
	if wordChar(s, start-1) || wordChar(s, end) || start > 0 && (s[start-1] == '-' || s[start-1] == '/' || s[start-1] == '#') || end < len(s) && s[end] == '-' {
		return "", false
	}
	d := digits(s[start:end])
	if len(d) < 7 || len(d) > 15 {
		return "", false
	}
	if s[start] == '+' {
		return "+" + d, true
	}
	return d, true
}

// checkIPv4 accepts a dotted quad netip parses, standing alone; one
// preceded by "v" or followed by another ".<digits>" is a version.
func checkIPv4(s string, start, end int) (string, bool) {
	if wordChar(s, start-1) || wordChar(s, end) || end+1 < len(s) && s[end] == '.' && s[end+1] >= '0' && s[end+1] <= '9' || start > 0 && s[start-1] == '.' {
		return "", false
	}
	return checkIP(s, start, end)
}

// checkIP accepts what netip.ParseAddr reads, other than "::".
func checkIP(s string, start, end int) (string, bool) {
	if wordChar(s, start-1) || wordChar(s, end) {
		return "", false
	}
	a, err := netip.ParseAddr(s[start:end])
	if err != nil || a.IsUnspecified() && a.Is6() {
		return "", false
	}
	return a.String(), true
}
