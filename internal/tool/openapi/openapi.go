// Package openapi imports OpenAPI documents (Swagger 2.0, OpenAPI 3.0 and
// 3.1; JSON or YAML) as tool specs: one operation per path × method, with
// the JSON Schema of its arguments and of its JSON result, and the HTTP
// binding needed to call it.
//
// The importer works on the document's generic JSON tree rather than on
// kin-openapi's typed model: decoding a large description (GitHub's, 13 MB)
// into openapi3.T takes over two seconds, mostly in its per-object
// extension decoding, while encoding/json into a generic tree takes a tenth
// of a second. kin-openapi is still used where it is the right tool:
// converting Swagger 2.0 to OpenAPI 3 (openapi2conv) and validating
// documents up to Importer.ValidateMaxBytes, whose findings become warnings.
// References are resolved by the importer within the document only; nothing
// is ever fetched, so a document cannot make the service read files or call
// URLs.
package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentplane/agentplane/internal/problem"
	"github.com/agentplane/agentplane/internal/tool"
)

// Defaults of an Importer.
const (
	// DefaultValidateMaxBytes: larger documents are not run through
	// kin-openapi's validator, whose typed decoding costs about 160 ms a
	// megabyte; the importer's own checks still apply.
	DefaultValidateMaxBytes = 1 << 20
	// DefaultMaxRefDepth bounds how many references are inlined along any
	// path of a schema.
	DefaultMaxRefDepth = 8
	// DefaultMaxSchemaBytes bounds one rendered schema (and one inlined
	// reference); bigger ones are rendered with fewer levels inlined.
	DefaultMaxSchemaBytes = 256 << 10
	// maxWarnings bounds Spec.Warnings; the last one counts the rest.
	maxWarnings = 100
	// collectAfterPrune is the document size from which garbage
	// collections run once the parsed tree is pruned and after each
	// rendering pass thrown away: each costs milliseconds, and together they
	// lower a large import's peak heap by a quarter.
	collectAfterPrune = 1 << 20
)

// Importer reads OpenAPI documents. The zero value is not ready: use New.
type Importer struct {
	// ValidateMaxBytes is the size up to which documents are validated with
	// kin-openapi; negative disables that validation.
	ValidateMaxBytes int
	// MaxRefDepth and MaxSchemaBytes bound schema inlining.
	MaxRefDepth    int
	MaxSchemaBytes int
}

var _ tool.Importer = (*Importer)(nil)

// New returns an Importer with the default limits.
func New() *Importer {
	return &Importer{
		ValidateMaxBytes: DefaultValidateMaxBytes,
		MaxRefDepth:      DefaultMaxRefDepth,
		MaxSchemaBytes:   DefaultMaxSchemaBytes,
	}
}

// Import reads an OpenAPI document. A document that is not OpenAPI 2.0, 3.0
// or 3.1 is a problem.SpecInvalid error; defects that do not stop indexing
// are returned as warnings.
func (im *Importer) Import(ctx context.Context, src tool.Source) (*tool.Spec, error) {
	root, isJSON, err := parse(src.Data)
	if err != nil {
		return nil, err
	}
	w := &warnings{}
	version, err := documentVersion(root)
	if err != nil {
		return nil, err
	}
	if p, ok := root["paths"]; ok && p != nil {
		if _, ok := p.(map[string]any); !ok {
			return nil, problem.New(problem.SpecInvalid, "paths: must be an object, got %s", typeName(p))
		}
	}
	validate := im.ValidateMaxBytes >= 0 && len(src.Data) <= im.ValidateMaxBytes
	var (
		baseURL string
		doc3    *openapi3.T // a Swagger 2.0 document converted for validation
	)
	if version == "2.0" {
		baseURL = baseURL2(root, src.URL, w.add)
		if validate {
			// Before fromSwagger rewrites the tree a YAML document's JSON
			// is made of.
			if doc3, err = swaggerForValidation(ctx, src.Data, isJSON, root); err != nil {
				w.add("validation: %s", kinMessage(err))
				validate = false
			}
		}
		fromSwagger(root, w.add)
	} else {
		baseURL = baseURL3(root, src.URL, w.add)
	}
	maxDepth, maxBytes := im.MaxRefDepth, im.MaxSchemaBytes
	if maxDepth <= 0 {
		maxDepth = DefaultMaxRefDepth
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxSchemaBytes
	}
	// Swagger 2.0 schemas follow the 3.0 dialect once converted.
	v30 := version == "2.0" || strings.HasPrefix(version, "3.0")
	prune(root)
	// The collector sizes the heap from what was live at its last cycle:
	// for a large document, a cycle once the tree is pruned, and after each
	// rendering pass that is thrown away, makes the heap grow from what the
	// import holds then rather than from the parse's or the last pass's peak.
	collect := func() {}
	if len(src.Data) >= collectAfterPrune {
		collect = runtime.GC
	}
	collect()
	ops, whole, err := im.operations(ctx, root, v30, maxDepth, maxBytes, tool.BudgetFor(len(src.Data)), collect, w)
	if err != nil {
		return nil, err
	}
	if validate {
		// kin-openapi's validator walks every reference as often as it is
		// used, without a bound: a document whose schemas do not fit the
		// rendering budget whole can keep it busy for minutes.
		switch {
		case !whole:
			w.add("validation skipped: the document's schemas expand past the size limit")
		case doc3 != nil:
			validateDoc(ctx, doc3, w)
		default:
			im.validate3(ctx, src.Data, isJSON, w)
		}
	}
	return &tool.Spec{
		Operations: ops,
		BaseURL:    baseURL,
		TokenURL:   tokenURL(root, baseURL, src.URL),
		Warnings:   w.list(),
	}, nil
}

// operations builds the operations with schemas inlined maxDepth
// references deep or, when they would exceed the rendering budget (the bytes
// of schema rendering an import may do), with the largest depth that fits
// (found by bisection), the same for every operation. When not even depth 1
// fits, the schemas rendered once the budget is spent are stubs. whole
// reports whether maxDepth fitted.
//
// Only the first attempt, at maxDepth, and the last, at the depth found,
// keep what they render; the attempts of the bisection drop each schema
// once it is charged, so that an import holds one rendering at a time.
//
// collect runs after each pass whose rendering is thrown away.
func (im *Importer) operations(ctx context.Context, root map[string]any, v30 bool, maxDepth, maxBytes, budget int, collect func(), w *warnings) (ops []tool.Operation, whole bool, err error) {
	type result struct {
		ops       []tool.Operation
		warnings  []string
		exhausted bool
	}
	try := func(depth int, trial bool) (*result, error) {
		pass := &warnings{}
		r := newRenderer(root, v30, depth, maxBytes, budget, pass.add)
		r.discard = trial
		bd := &builder{root: root, warn: pass.add, render: r}
		bd.abortOnBudget = depth > 1
		ops, err := bd.operations(ctx)
		if trial || errors.Is(err, errBudget) {
			defer collect()
		}
		if errors.Is(err, errBudget) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &result{ops: ops, warnings: pass.items, exhausted: bd.render.exhausted}, nil
	}
	best, err := try(maxDepth, false)
	if err != nil {
		return nil, false, err
	}
	lo := maxDepth
	if best == nil {
		// Invariant: depths up to lo fit (depth 1 always does), depths from
		// hi on do not.
		var hi int
		lo, hi = 1, maxDepth
		for lo+1 < hi {
			depth := (lo + hi) / 2
			r, err := try(depth, true)
			if err != nil {
				return nil, false, err
			}
			if r == nil {
				hi = depth
			} else {
				lo = depth
			}
		}
		if best, err = try(lo, false); err != nil {
			return nil, false, err
		}
	}
	for _, item := range best.warnings {
		w.add("%s", item)
	}
	switch {
	case best.exhausted:
		w.add("schemas are too large to inline: past the size limit, schemas and references are not expanded")
	case lo < maxDepth:
		w.add("schemas are inlined %d references deep instead of %d to bound their size", lo, maxDepth)
	}
	return best.ops, !best.exhausted && lo == maxDepth, nil
}

// prune drops what indexing never reads (examples, webhooks, the members of
// operations the builder does not look at) and gives equal strings, objects
// and arrays under paths one copy, so that the garbage collector can reclaim
// the rest while operations are built: Kubernetes' document spells out the
// same parameters, with the same descriptions, on hundreds of paths. (What
// is shared under components or definitions is already written once.)
func prune(root map[string]any) {
	if c, ok := root["components"].(map[string]any); ok {
		delete(c, "examples")
	}
	delete(root, "webhooks")
	delete(root, "x-webhooks")
	if paths, ok := root["paths"].(map[string]any); ok {
		for _, item := range paths {
			item, _ := item.(map[string]any)
			for _, method := range methods {
				if op, ok := item[method].(map[string]any); ok {
					for k := range op {
						if !operationMembers[k] {
							delete(op, k)
						}
					}
				}
			}
		}
	}
	s := &sharer{strings: make(map[string]int), nodes: make(map[string]int)}
	if c, _, replaced := s.share(root["paths"], nil, 0); replaced {
		root["paths"] = c
	}
}

// operationMembers are the members of an operation the builder reads.
var operationMembers = map[string]bool{
	"operationId": true, "summary": true, "description": true, "parameters": true,
	"requestBody": true, "responses": true, "security": true,
}

// A sharer replaces values of a tree by equal ones met before. Nothing
// writes to the tree afterwards, so equal objects and arrays can be one.
type sharer struct {
	strings map[string]int // a string → its number
	strs    []string
	nodes   map[string]int // an object's or array's key → its number
	shared  []any
	// keys and names are scratch space for each depth of the tree.
	keys  [][]byte
	names [][]string
}

// appendKey appends what tells a value from the values not equal to it.
func appendKey(b []byte, kind byte, n int, text string) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 36)
	b = append(b, text...)
	return append(b, 0)
}

// share returns the copy of v to keep, whether it replaces v, and b with
// v's key appended; depth is v's in the tree.
func (s *sharer) share(v any, b []byte, depth int) (any, []byte, bool) {
	switch x := v.(type) {
	case string:
		c, n, seen := s.str(x)
		return c, appendKey(b, 's', n, ""), seen
	case json.Number:
		return x, appendKey(b, 'n', 0, string(x)), false
	case bool:
		if x {
			return x, appendKey(b, 't', 0, ""), false
		}
		return x, appendKey(b, 'f', 0, ""), false
	case nil:
		return nil, appendKey(b, 'z', 0, ""), false
	case map[string]any:
		key, names := s.scratch(depth)
		key = append(key, 'o')
		for k := range x {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			_, n, _ := s.str(k)
			key = appendKey(key, 'k', n, "")
			c, next, replaced := s.share(x[k], key, depth+1)
			if replaced {
				x[k] = c
			}
			key = next
		}
		s.keys[depth], s.names[depth] = key, names
		return s.node(x, key, b)
	case []any:
		key, _ := s.scratch(depth)
		key = append(key, 'a')
		for i := range x {
			c, next, replaced := s.share(x[i], key, depth+1)
			if replaced {
				x[i] = c
			}
			key = next
		}
		s.keys[depth] = key
		return s.node(x, key, b)
	}
	// YAML scalars other than the above (float64, int).
	return v, appendKey(b, 'v', 0, fmt.Sprint(v)), false
}

// scratch returns the emptied scratch space of a depth.
func (s *sharer) scratch(depth int) ([]byte, []string) {
	for len(s.keys) <= depth {
		s.keys, s.names = append(s.keys, nil), append(s.names, nil)
	}
	return s.keys[depth][:0], s.names[depth][:0]
}

// str returns the first copy of x seen, its number, and whether x was seen
// before.
func (s *sharer) str(x string) (string, int, bool) {
	n, ok := s.strings[x]
	if !ok {
		n = len(s.strs)
		s.strings[x] = n
		s.strs = append(s.strs, x)
	}
	return s.strs[n], n, ok
}

// node returns the first object or array seen with v's key, b with its
// number appended, and whether it was seen before.
func (s *sharer) node(v any, key, b []byte) (any, []byte, bool) {
	n, ok := s.nodes[string(key)]
	if !ok {
		n = len(s.shared)
		s.nodes[string(key)] = n
		s.shared = append(s.shared, v)
	}
	return s.shared[n], appendKey(b, 'm', n, ""), ok
}

var version3 = regexp.MustCompile(`^3\.[0-2](\.\d+)?(-[0-9A-Za-z.-]+)?$`)

// documentVersion returns "2.0" or the document's 3.x version.
func documentVersion(root map[string]any) (string, error) {
	if v, ok := root["openapi"]; ok {
		s, ok := v.(string)
		if !ok {
			return "", problem.New(problem.SpecInvalid, `openapi: must be a string such as "3.1.0", got %s`, typeName(v))
		}
		if !version3.MatchString(s) {
			return "", problem.New(problem.SpecInvalid, "openapi: unsupported version %q (supported: 2.0, 3.0.x, 3.1.x)", s)
		}
		return s, nil
	}
	if v, ok := root["swagger"]; ok {
		if s, _ := v.(string); s != "2.0" {
			return "", problem.New(problem.SpecInvalid, `swagger: unsupported version %s (supported: "2.0")`, describe(v))
		}
		return "2.0", nil
	}
	return "", problem.New(problem.SpecInvalid, `not an OpenAPI document: no "openapi" or "swagger" field at the top level`)
}

// describe shows a scalar for a message, quoted when a string.
func describe(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	b := appendValue(nil, v)
	if len(b) > 40 {
		return typeName(v)
	}
	return string(b)
}

var yamlVersionKey = regexp.MustCompile(`(?m)^["']?(openapi|swagger)["']?[ \t]*:`)

// Detect reports whether data looks like an OpenAPI or Swagger document: a
// JSON object or a YAML mapping with a top-level "openapi" or "swagger"
// member. It does not validate the document.
func Detect(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var probe struct {
			OpenAPI json.RawMessage `json:"openapi"`
			Swagger json.RawMessage `json:"swagger"`
		}
		if json.Unmarshal(trimmed, &probe) == nil {
			return probe.OpenAPI != nil || probe.Swagger != nil
		}
	}
	return yamlVersionKey.Match(data)
}

// warnings collects defects found while importing, at most maxWarnings.
type warnings struct {
	items   []string
	dropped int
}

func (w *warnings) add(format string, args ...any) {
	if len(w.items) >= maxWarnings {
		w.dropped++
		return
	}
	w.items = append(w.items, fmt.Sprintf(format, args...))
}

func (w *warnings) list() []string {
	if w.dropped > 0 {
		return append(w.items, fmt.Sprintf("and %d more warnings", w.dropped))
	}
	return w.items
}
