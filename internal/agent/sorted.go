package agent

import (
	"sort"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// sortedAdapter hands expressions the run's maps (context, caller, saved
// values, args, and every map nested in them) with their keys in sorted
// order, so `context.map(k, k)` gives the same list on every run, and a
// replay of the run gives it too. Go's map order is random; CEL's native
// maps iterate in it.
type sortedAdapter struct{ types.Adapter }

// NativeToValue implements types.Adapter.
func (a sortedAdapter) NativeToValue(v any) ref.Val {
	if m, ok := v.(map[string]any); ok {
		return sortedMap{Mapper: types.NewStringInterfaceMap(a, m), m: m}
	}
	return a.Adapter.NativeToValue(v)
}

// sortedMap is a map whose iteration and folds follow its sorted keys.
// Lookups, the common case, sort nothing.
type sortedMap struct {
	traits.Mapper
	m map[string]any
}

// keys returns the map's keys in order.
func (m sortedMap) keys() []string {
	keys := make([]string, 0, len(m.m))
	for k := range m.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Iterator implements traits.Iterable.
func (m sortedMap) Iterator() traits.Iterator {
	return &keyIterator{Iterator: m.Mapper.Iterator(), keys: m.keys()}
}

// Fold implements traits.Foldable, for two-variable comprehensions.
func (m sortedMap) Fold(f traits.Folder) {
	keyOnly := false
	if kf, ok := f.(interface{ FoldKeyOnly() bool }); ok {
		keyOnly = kf.FoldKeyOnly()
	}
	for _, k := range m.keys() {
		key := types.String(k)
		var v any
		if !keyOnly {
			v = m.Get(key)
		}
		if !f.FoldEntry(key, v) {
			return
		}
	}
}

// keyIterator iterates keys in order; the embedded iterator supplies the
// ref.Val methods only.
type keyIterator struct {
	traits.Iterator
	keys []string
	i    int
}

func (it *keyIterator) HasNext() ref.Val { return types.Bool(it.i < len(it.keys)) }

func (it *keyIterator) Next() ref.Val {
	if it.i >= len(it.keys) {
		return nil
	}
	it.i++
	return types.String(it.keys[it.i-1])
}
