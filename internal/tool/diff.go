// Tool drift (SPEC §4 "Tool drift"): a structural comparison of two
// revisions of a tool's operations, which were added or removed, and for
// each one present in both how its input and output schemas changed and
// whether a caller written for the old revision breaks on the new one.

package tool

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Kinds of change.
const (
	ChangeParameterRemoved     = "parameter_removed"
	ChangeParameterRenamed     = "parameter_renamed"
	ChangeParameterAdded       = "parameter_added"
	ChangeRequiredAdded        = "required_added"
	ChangeRequiredRemoved      = "required_removed"
	ChangeTypeChanged          = "type_changed"
	ChangeFormatChanged        = "format_changed"
	ChangeEnumNarrowed         = "enum_narrowed"
	ChangeEnumWidened          = "enum_widened"
	ChangeResponseFieldRemoved = "response_field_removed"
	ChangeResponseFieldAdded   = "response_field_added"
	ChangeEndpointChanged      = "endpoint_changed"
	ChangeModeRemoved          = "mode_removed"
	ChangeModeAdded            = "mode_added"
)

// maxDiffDepth bounds the walk through nested schemas (they are already
// bounded by the importers' rendering).
const maxDiffDepth = 32

// Change is one difference within an operation.
type Change struct {
	Kind string `json:"kind"`
	// Path is the argument ("customer.address.city", "ids[]") or, for the
	// operation's result, "response" and the field's path below it.
	Path     string `json:"path"`
	Breaking bool   `json:"breaking"`
	Detail   string `json:"detail"`
}

// ChangedOperation is an operation present in both revisions whose schemas differ.
type ChangedOperation struct {
	Operation string   `json:"operation"`
	Breaking  bool     `json:"breaking"`
	Changes   []Change `json:"changes"`
}

// Diff is what changed between two revisions of a tool's operations.
type Diff struct {
	Added   []string           `json:"added"`
	Removed []string           `json:"removed"`
	Changed []ChangedOperation `json:"changed"`
}

// Breaking reports whether a caller of the old revision may break: an
// operation removed or a breaking change in one.
func (d *Diff) Breaking() bool {
	if len(d.Removed) > 0 {
		return true
	}
	for _, c := range d.Changed {
		if c.Breaking {
			return true
		}
	}
	return false
}

// Empty reports whether the revisions do not differ.
func (d *Diff) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0
}

// DiffSummary counts a diff's parts.
type DiffSummary struct {
	Added    int  `json:"added"`
	Removed  int  `json:"removed"`
	Changed  int  `json:"changed"`
	Breaking bool `json:"breaking"`
}

// Summary is the diff in counts.
func (d *Diff) Summary() DiffSummary {
	return DiffSummary{Added: len(d.Added), Removed: len(d.Removed), Changed: len(d.Changed), Breaking: d.Breaking()}
}

// DiffOperations compares the operations of the old revision with those of the
// new one, by operation id. Lists are sorted by operation id, an
// operation's changes by path and kind.
func DiffOperations(old, new []Operation) Diff {
	byID := make(map[string]*Operation, len(old))
	for i := range old {
		byID[old[i].ID] = &old[i]
	}
	d := Diff{Added: []string{}, Removed: []string{}, Changed: []ChangedOperation{}}
	seen := make(map[string]bool, len(new))
	for i := range new {
		op := &new[i]
		seen[op.ID] = true
		prev, ok := byID[op.ID]
		if !ok {
			d.Added = append(d.Added, op.ID)
			continue
		}
		if cs := DiffOperation(prev, op); len(cs) > 0 {
			slices.SortStableFunc(cs, func(a, b Change) int {
				return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Kind, b.Kind))
			})
			c := ChangedOperation{Operation: op.ID, Changes: cs}
			for _, ch := range cs {
				c.Breaking = c.Breaking || ch.Breaking
			}
			d.Changed = append(d.Changed, c)
		}
	}
	for id := range byID {
		if !seen[id] {
			d.Removed = append(d.Removed, id)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	slices.SortFunc(d.Changed, func(a, b ChangedOperation) int { return strings.Compare(a.Operation, b.Operation) })
	return d
}

// DiffOperation lists the changes from one revision of an operation to the
// next: its input schema (the arguments), its output schema (the result)
// and, for an HTTP operation, its method and path.
func DiffOperation(old, new *Operation) []Change {
	w := diffWalker{}
	w.schema("", decodeSchema(old.Input), decodeSchema(new.Input), false, 0)
	if old.Output != nil || new.Output != nil {
		w.schema("response", decodeSchema(old.Output), decodeSchema(new.Output), true, 0)
	}
	if old.GraphQL != nil && new.GraphQL != nil {
		w.graphQLArgs(old.GraphQL.Args, new.GraphQL.Args)
	}
	if old.A2A != nil && new.A2A != nil {
		w.modes("input_modes", "takes", old.A2A.InputModes, new.A2A.InputModes)
		w.modes("output_modes", "answers in", old.A2A.OutputModes, new.A2A.OutputModes)
	}
	if old.HTTP != nil && new.HTTP != nil && (old.HTTP.Method != new.HTTP.Method || old.HTTP.Path != new.HTTP.Path) {
		w.add(ChangeEndpointChanged, "", false, "%s %s is now %s %s (agentplane calls the new one; the arguments are unchanged)",
			old.HTTP.Method, old.HTTP.Path, new.HTTP.Method, new.HTTP.Path)
	}
	return w.changes
}

func decodeSchema(raw json.RawMessage) map[string]any {
	var m map[string]any
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m) // a stored schema is valid JSON; anything else compares as no schema
	}
	return m
}

type diffWalker struct{ changes []Change }

func (w *diffWalker) add(kind, path string, breaking bool, format string, args ...any) {
	w.changes = append(w.changes, Change{Kind: kind, Path: path, Breaking: breaking, Detail: fmt.Sprintf(format, args...)})
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fieldName names the thing at path for details: an argument or a response field.
func fieldName(path string, output bool) string {
	if output {
		return "response field " + path
	}
	return "argument " + path
}

// schema compares two schemas at path; output is true below the result.
func (w *diffWalker) schema(path string, old, new map[string]any, output bool, depth int) {
	if old == nil || new == nil || depth > maxDiffDepth {
		return
	}
	if ot, nt := schemaType(old), schemaType(new); ot != "" && nt != "" && ot != nt {
		w.add(ChangeTypeChanged, path, true, "the type of %s changed from %s to %s", fieldName(path, output), ot, nt)
		return // what lies below a changed type is another schema
	}
	of, _ := old["format"].(string)
	nf, _ := new["format"].(string)
	if of != nf && of != "" && nf != "" || of == "" && nf != "" && !output {
		w.add(ChangeFormatChanged, path, true, "the format of %s changed from %q to %q", fieldName(path, output), of, nf)
	}
	w.enum(path, old, new, output)
	w.properties(path, old, new, output, depth)
	if oi, ok := old["items"].(map[string]any); ok {
		if ni, ok := new["items"].(map[string]any); ok {
			w.schema(path+"[]", oi, ni, output, depth+1)
		}
	}
}

// schemaType is a schema's type, its types joined with "|" when a list.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		var names []string
		for _, x := range t {
			if n, ok := x.(string); ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return strings.Join(names, "|")
	}
	return ""
}

func (w *diffWalker) enum(path string, old, new map[string]any, output bool) {
	oe, oHas := old["enum"].([]any)
	ne, nHas := new["enum"].([]any)
	if !oHas && !nHas {
		return
	}
	key := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	have := map[string]bool{}
	for _, v := range ne {
		have[key(v)] = true
	}
	had := map[string]bool{}
	var gone, added []string
	for _, v := range oe {
		had[key(v)] = true
		if nHas && !have[key(v)] {
			gone = append(gone, key(v))
		}
	}
	for _, v := range ne {
		if oHas && !had[key(v)] {
			added = append(added, key(v))
		}
	}
	switch {
	case !oHas:
		// A value that was free now has a list: the arguments' side narrows.
		w.add(ChangeEnumNarrowed, path, !output, "%s now only takes %s", fieldName(path, output), strings.Join(enumKeys(ne, key), ", "))
	case !nHas:
		w.add(ChangeEnumWidened, path, false, "%s no longer limits its values", fieldName(path, output))
	default:
		if len(gone) > 0 {
			w.add(ChangeEnumNarrowed, path, !output, "%s no longer takes %s", fieldName(path, output), strings.Join(gone, ", "))
		}
		if len(added) > 0 {
			w.add(ChangeEnumWidened, path, false, "%s also takes %s", fieldName(path, output), strings.Join(added, ", "))
		}
	}
}

func enumKeys(vs []any, key func(any) string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = key(v)
	}
	return out
}

func requiredOf(s map[string]any) map[string]bool {
	req := map[string]bool{}
	list, _ := s["required"].([]any)
	for _, x := range list {
		if n, ok := x.(string); ok {
			req[n] = true
		}
	}
	return req
}

// properties compares an object's members: removed, renamed (a removed
// and an added member with the same schema, one each), added, made
// required or optional, and each kept one's schema.
func (w *diffWalker) properties(path string, old, new map[string]any, output bool, depth int) {
	op, _ := old["properties"].(map[string]any)
	np, _ := new["properties"].(map[string]any)
	if op == nil && np == nil {
		return
	}
	oreq, nreq := requiredOf(old), requiredOf(new)
	var removed, added []string
	for _, name := range slices.Sorted(maps.Keys(op)) {
		if _, ok := np[name]; !ok {
			removed = append(removed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(np)) {
		if _, ok := op[name]; !ok {
			added = append(added, name)
		}
	}
	renamed := map[string]string{} // old name → new name
	if !output && len(removed) == 1 && len(added) == 1 && sameSchema(op[removed[0]], np[added[0]]) {
		renamed[removed[0]] = added[0]
	}
	for _, name := range removed {
		p := joinPath(path, name)
		switch {
		case renamed[name] != "":
			w.add(ChangeParameterRenamed, p, true, "argument %s is now named %s", p, joinPath(path, renamed[name]))
		case output:
			w.add(ChangeResponseFieldRemoved, p, true, "the result no longer has %s", p)
		default:
			w.add(ChangeParameterRemoved, p, true, "argument %s was removed; a call that passes it is refused", p)
		}
	}
	isRenamed := func(n string) bool { return renamedFrom(renamed, n) != "" }
	for _, name := range added {
		p := joinPath(path, name)
		switch {
		case isRenamed(name):
			if !output && nreq[name] && !oreq[renamedFrom(renamed, name)] {
				w.add(ChangeRequiredAdded, p, true, "argument %s, renamed from %s, is now required", p, joinPath(path, renamedFrom(renamed, name)))
			}
		case output:
			w.add(ChangeResponseFieldAdded, p, false, "the result also has %s", p)
		case nreq[name]:
			w.add(ChangeRequiredAdded, p, true, "new required argument %s; a call without it is refused", p)
		default:
			w.add(ChangeParameterAdded, p, false, "new optional argument %s", p)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(op)) {
		ns, ok := np[name]
		if !ok {
			continue
		}
		p := joinPath(path, name)
		if !output && nreq[name] && !oreq[name] {
			w.add(ChangeRequiredAdded, p, true, "argument %s is now required", p)
		}
		if !output && oreq[name] && !nreq[name] {
			w.add(ChangeRequiredRemoved, p, false, "argument %s is now optional", p)
		}
		os, _ := op[name].(map[string]any)
		nsm, _ := ns.(map[string]any)
		if path == "" && name == "body" && !output && os["properties"] != nil {
			// The whole object body: its members are top-level arguments
			// too, and compared there.
			continue
		}
		w.schema(p, os, nsm, output, depth+1)
	}
}

// sameSchema compares two schemas ignoring their descriptions.
func sameSchema(a, b any) bool {
	strip := func(v any) []byte {
		m, ok := v.(map[string]any)
		if ok {
			m = maps.Clone(m)
			delete(m, "description")
			delete(m, "title")
			v = m
		}
		out, _ := json.Marshal(v)
		return out
	}
	return bytes.Equal(strip(a), strip(b))
}

// graphQLArgs reports an argument whose GraphQL type changed where its
// JSON Schema cannot tell (ID and String are both strings, Int and Float
// both numbers to JSON): the named type, list or not, nullability aside
// (an argument made non-null is required_added from the schema).
func (w *diffWalker) graphQLArgs(old, new []Arg) {
	types := make(map[string]string, len(old))
	for _, a := range old {
		types[a.Name] = a.Type
	}
	for _, a := range new {
		was, ok := types[a.Name]
		if !ok || strings.ReplaceAll(was, "!", "") == strings.ReplaceAll(a.Type, "!", "") {
			continue
		}
		if slices.ContainsFunc(w.changes, func(c Change) bool { return c.Path == a.Name && c.Kind == ChangeTypeChanged }) {
			continue
		}
		w.add(ChangeTypeChanged, a.Name, true, "the GraphQL type of argument %s changed from %s to %s", a.Name, was, a.Type)
	}
}

// modes compares an A2A skill's input or output modes: a mode dropped
// breaks a caller that sends (or reads) it; one added breaks nothing. An
// empty list (no modes declared) is not compared.
func (w *diffWalker) modes(path, verb string, old, new []string) {
	if len(old) == 0 || len(new) == 0 {
		return
	}
	for _, m := range old {
		if !slices.Contains(new, m) {
			w.add(ChangeModeRemoved, path, true, "the skill no longer %s %s", verb, m)
		}
	}
	for _, m := range new {
		if !slices.Contains(old, m) {
			w.add(ChangeModeAdded, path, false, "the skill also %s %s", verb, m)
		}
	}
}

// renamedFrom is the old name of a member renamed to name.
func renamedFrom(renamed map[string]string, name string) string {
	for from, to := range renamed {
		if to == name {
			return from
		}
	}
	return ""
}
