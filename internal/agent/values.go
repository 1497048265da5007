package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// decodeValue decodes one JSON value as expressions see it: objects,
// arrays, strings, booleans and null as json.Unmarshal decodes them, and
// each number as exprNumber reads it.
func decodeValue(raw []byte) (any, error) {
	var v any
	if err := decodeNumbers(raw, &v); err != nil {
		return nil, err
	}
	return readNumbers(v)
}

// readNumbers replaces, in place, each json.Number of v, a value decoded
// from JSON, by what exprNumber reads.
func readNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		n, ok := exprNumber(x)
		if !ok {
			return nil, fmt.Errorf("number out of range: %.32s", x)
		}
		return n, nil
	case map[string]any:
		for k, e := range x {
			var err error
			if x[k], err = readNumbers(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range x {
			var err error
			if x[i], err = readNumbers(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// exprArgs returns a call's args as a policy rule sees them: each
// json.Number (a number a model or an external agent wrote) as exprNumber
// reads it, every other value as it is, so a value an expression built
// keeps the type the expression gave it. The args themselves, which the
// call sends, are left as they are.
func exprArgs(args map[string]any) map[string]any {
	out, _ := writtenNumbers(args).(map[string]any)
	return out
}

// writtenNumbers is a copy of v, with exprNumber's reading of each
// json.Number.
func writtenNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, ok := exprNumber(x); ok {
			return n
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = writtenNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = writtenNumbers(e)
		}
		return out
	}
	return v
}

// exprNumber is the value expressions see for the JSON number n: a double
// (float64), as they always have, except for an integer the nearest
// double would change (wideInteger: past 2^53, 1234567890123456789 would
// be 1234567890123456768), which is an int (int64), or a uint (uint64)
// above int64's range, so that it reaches a call's args with every digit.
// An integer past uint64's range, or below int64's, is a double. ok is
// false for a number past the doubles' range, which json.Unmarshal
// refuses too.
func exprNumber(n json.Number) (any, bool) {
	if digits, wide := wideInteger(string(n)); wide {
		if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return i, true
		}
		if u, err := strconv.ParseUint(digits, 10, 64); err == nil {
			return u, true
		}
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

// toJSONValue converts a CEL value to a JSON-compatible Go value: nil, bool,
// int64, uint64, float64, string, []any or map[string]any.
func toJSONValue(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not representable in JSON", f)
		}
		return f, nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(x), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return x.Duration.String(), nil
	case *types.Err:
		return nil, x
	}
	switch v.Type() {
	case types.ListType:
		l := v.(traits.Lister)
		n, _ := l.Size().(types.Int)
		out := make([]any, 0, int(n))
		for it := l.Iterator(); it.HasNext() == types.True; {
			e, err := toJSONValue(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case types.MapType:
		m := v.(traits.Mapper)
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			e, err := toJSONValue(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s value is not representable in JSON", v.Type().TypeName())
}

// valueTree is an args or set value: a CEL leaf, a literal, or nested maps
// and lists of them.
type valueTree struct {
	expr  *expr
	lit   any
	keys  []string // sorted, for an object
	obj   map[string]*valueTree
	list  []*valueTree
	shape int
}

const (
	shapeLiteral = iota
	shapeExpr
	shapeObject
	shapeList
)

// compileTree compiles v found at field, reporting problems through bad.
func compileTree(env *cel.Env, v any, field string, bad func(field, msg string)) *valueTree {
	switch x := v.(type) {
	case string:
		e, msg := compileExpr(env, x, wantAny)
		if msg != "" {
			bad(field, msg)
		}
		return &valueTree{shape: shapeExpr, expr: e}
	case map[string]any:
		t := &valueTree{shape: shapeObject, obj: map[string]*valueTree{}}
		for k := range x {
			t.keys = append(t.keys, k)
		}
		sort.Strings(t.keys)
		for _, k := range t.keys {
			t.obj[k] = compileTree(env, x[k], field+"."+k, bad)
		}
		return t
	case []any:
		t := &valueTree{shape: shapeList}
		for i, e := range x {
			t.list = append(t.list, compileTree(env, e, fmt.Sprintf("%s[%d]", field, i), bad))
		}
		return t
	case json.Number:
		// A number written in the definition is read as one read from
		// JSON (exprNumber): a double, as before, or an integer past 2^53
		// with every digit.
		n, ok := exprNumber(x)
		if !ok {
			bad(field, "is a number past the range of a double")
		}
		return &valueTree{shape: shapeLiteral, lit: n}
	case nil, bool, float64, int, int64:
		return &valueTree{shape: shapeLiteral, lit: x}
	default:
		bad(field, fmt.Sprintf("unsupported value of type %T", v))
		return &valueTree{shape: shapeLiteral}
	}
}

// eval evaluates every leaf, keys in sorted order so errors are deterministic.
func (t *valueTree) eval(ctx context.Context, act interpreter.Activation) (any, error) {
	switch t.shape {
	case shapeExpr:
		if t.expr == nil {
			return nil, errors.New("expression did not compile")
		}
		return t.expr.evalJSON(ctx, act)
	case shapeObject:
		out := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			v, err := t.obj[k].eval(ctx, act)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = v
		}
		return out, nil
	case shapeList:
		out := make([]any, 0, len(t.list))
		for i, e := range t.list {
			v, err := e.eval(ctx, act)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, v)
		}
		return out, nil
	}
	return t.lit, nil
}
