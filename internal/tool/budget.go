package tool

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/agentplane/agentplane/internal/problem"
)

// Budgets of an import. A document's operations can describe far more than
// the document spells out, as when a thousand operations share one large
// type, so what an importer renders is bounded by the document's size.
const (
	// budgetBase and budgetPerByte make the rendering budget of a document
	// of n bytes: budgetBase + budgetPerByte × n bytes. GitHub's REST
	// description (13 MB) renders 20 MB of schemas.
	budgetBase    = 16 << 20
	budgetPerByte = 1
)

// BudgetFor is the rendering budget of a document of n bytes, imported
// documents included.
func BudgetFor(n int) int { return budgetBase + budgetPerByte*n }

// Budget counts down the bytes of operations an import may still store.
// The GraphQL and SOAP importers first charge every operation with what its
// calls need (selection sets, parts), then encode the operations' schemas
// with what is left: once the schemas of an operation do not fit, those of
// the operations after it are stubs.
type Budget struct {
	doc, total, left int
	// full says why schemas get stubs, once they do; stubbed counts the
	// operations given stubs.
	full    string
	stubbed int
}

// NewBudget returns the budget of a document of n bytes (BudgetFor).
func NewBudget(n int) *Budget {
	total := BudgetFor(n)
	return &Budget{doc: n, total: total, left: total}
}

// Schemas of operations that no longer fit.
const (
	stubNote   = "not described: the document's schemas are over the size limit"
	stubInput  = `{"type":"object","description":"` + stubNote + `"}`
	stubOutput = `{"description":"` + stubNote + `"}`
	stubs      = len(stubInput) + len(stubOutput)
)

// Operation charges what one operation needs to be called, n bytes that
// what names, and room for its schemas as stubs; a problem.SpecTooLarge
// error when they do not fit. Every operation is charged before the
// schemas of any are encoded.
func (b *Budget) Operation(n int, what string) error {
	b.left -= n + stubs
	if b.left < 0 {
		return problem.New(problem.SpecTooLarge, "the operations' %s come to more than %d bytes, the limit for a document of %d bytes", what, b.total, b.doc)
	}
	return nil
}

// Schemas returns the JSON of an operation's input and output schemas,
// built of maps with string keys, slices, strings, booleans, integers and
// json.RawMessage (the bytes json.Marshal writes); a nil out has no JSON.
// Once schemas do not fit, which is found without writing more than fits,
// the operation and every later one get stubs.
func (b *Budget) Schemas(in, out map[string]any) (json.RawMessage, json.RawMessage) {
	if b.full == "" {
		e := encoder{limit: b.left + stubs}
		if e.value(in) {
			n := len(e.buf)
			if out == nil || e.value(out) {
				b.left -= len(e.buf) - stubs
				var outJSON json.RawMessage
				if out != nil {
					outJSON = e.buf[n:len(e.buf):len(e.buf)]
				}
				return e.buf[:n:n], outJSON
			}
		}
		b.Stop(fmt.Sprintf("they would take the operations over %d bytes, the limit for a document of %d bytes", b.total, b.doc))
	}
	return b.Stubs(out != nil)
}

// Stop makes every later operation's schemas stubs; why, a clause, says
// why in the warning.
func (b *Budget) Stop(why string) {
	if b.full == "" {
		b.full = why
	}
}

// Full reports whether schemas get stubs from now on, so that they need
// not be built.
func (b *Budget) Full() bool { return b.full != "" }

// Stubs gives an operation stub schemas, an output only when it has one.
func (b *Budget) Stubs(output bool) (json.RawMessage, json.RawMessage) {
	b.stubbed++
	if !output {
		return json.RawMessage(stubInput), nil
	}
	return json.RawMessage(stubInput), json.RawMessage(stubOutput)
}

// Warning says how many operations got stub schemas; "" when none did.
func (b *Budget) Warning() string {
	if b.stubbed == 0 {
		return ""
	}
	return fmt.Sprintf("the schemas of the last %d operations are not described: %s", b.stubbed, b.full)
}

// encoder writes JSON until it has written more than limit bytes.
type encoder struct {
	buf   []byte
	limit int
}

func (e *encoder) value(v any) bool {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case string:
		e.string(x)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case json.RawMessage:
		if x == nil {
			e.buf = append(e.buf, "null"...)
		} else {
			e.buf = append(e.buf, x...)
		}
	case []string:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			break
		}
		e.buf = append(e.buf, '[')
		for i, s := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.string(s)
			if len(e.buf) > e.limit {
				return false
			}
		}
		e.buf = append(e.buf, ']')
	case []any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			break
		}
		e.buf = append(e.buf, '[')
		for i, item := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if !e.value(item) {
				return false
			}
		}
		e.buf = append(e.buf, ']')
	case map[string]any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			break
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.string(k)
			e.buf = append(e.buf, ':')
			if !e.value(x[k]) {
				return false
			}
		}
		e.buf = append(e.buf, '}')
	default:
		data, err := json.Marshal(x)
		if err != nil {
			panic(fmt.Sprintf("tool: encode a schema's %T: %v", x, err))
		}
		e.buf = append(e.buf, data...)
	}
	return len(e.buf) <= e.limit
}

// string writes s as json.Marshal does.
func (e *encoder) string(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s) // a string always encodes
			e.buf = append(e.buf, data...)
			return
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

// CapWarnings keeps the first max warnings and, when there are more, adds
// one that counts the rest.
func CapWarnings(w []string, max int) []string {
	if len(w) <= max {
		return w
	}
	return append(w[:max:max], fmt.Sprintf("and %d more warnings", len(w)-max))
}
