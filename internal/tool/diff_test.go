package tool

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func diffOp(id, input, output string) Operation {
	o := Operation{ID: id, Input: json.RawMessage(input)}
	if output != "" {
		o.Output = json.RawMessage(output)
	}
	return o
}

const diffBase = `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},
	"state":{"type":"string","enum":["open","closed","all"]}},"required":["id"]}`

func TestDiffOperation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old, new   string
		oout, nout string
		want       []Change
	}{
		{name: "unchanged", old: diffBase, new: diffBase},
		{name: "description only", old: `{"type":"object","properties":{"a":{"type":"string","description":"x"}}}`,
			new: `{"type":"object","properties":{"a":{"type":"string","description":"y"}}}`},
		{name: "parameter removed", old: diffBase,
			new:  `{"type":"object","properties":{"id":{"type":"string"},"state":{"type":"string","enum":["open","closed","all"]}},"required":["id"]}`,
			want: []Change{{Kind: ChangeParameterRemoved, Path: "limit", Breaking: true}}},
		{name: "parameter renamed", old: diffBase,
			new:  `{"type":"object","properties":{"id":{"type":"string"},"max":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]}},"required":["id"]}`,
			want: []Change{{Kind: ChangeParameterRenamed, Path: "limit", Breaking: true}}},
		{name: "new required and optional", old: diffBase,
			new: `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]},
				"org":{"type":"string"},"page":{"type":"integer"}},"required":["id","org"]}`,
			want: []Change{{Kind: ChangeRequiredAdded, Path: "org", Breaking: true}, {Kind: ChangeParameterAdded, Path: "page"}}},
		{name: "made required, made optional", old: diffBase,
			new:  `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]}},"required":["limit"]}`,
			want: []Change{{Kind: ChangeRequiredRemoved, Path: "id"}, {Kind: ChangeRequiredAdded, Path: "limit", Breaking: true}}},
		{name: "type and format", old: `{"type":"object","properties":{"n":{"type":"integer"},"at":{"type":"string","format":"date"}}}`,
			new:  `{"type":"object","properties":{"n":{"type":"string"},"at":{"type":"string","format":"date-time"}}}`,
			want: []Change{{Kind: ChangeFormatChanged, Path: "at", Breaking: true}, {Kind: ChangeTypeChanged, Path: "n", Breaking: true}}},
		{name: "enum narrowed and widened", old: diffBase,
			new:  `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","draft"]}},"required":["id"]}`,
			want: []Change{{Kind: ChangeEnumNarrowed, Path: "state", Breaking: true}, {Kind: ChangeEnumWidened, Path: "state"}}},
		{name: "enum widened only", old: diffBase,
			new:  `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all","draft"]}},"required":["id"]}`,
			want: []Change{{Kind: ChangeEnumWidened, Path: "state"}}},
		{name: "nested and items", old: `{"type":"object","properties":{"to":{"type":"object","properties":{"city":{"type":"string"}}},"tags":{"type":"array","items":{"type":"string"}}}}`,
			new:  `{"type":"object","properties":{"to":{"type":"object","properties":{"city":{"type":"integer"}}},"tags":{"type":"array","items":{"type":"integer"}}}}`,
			want: []Change{{Kind: ChangeTypeChanged, Path: "tags[]", Breaking: true}, {Kind: ChangeTypeChanged, Path: "to.city", Breaking: true}}},
		{name: "response field removed and added", old: diffBase, new: diffBase,
			oout: `{"type":"object","properties":{"id":{"type":"string"},"email":{"type":"string"}}}`,
			nout: `{"type":"object","properties":{"id":{"type":"string"},"phone":{"type":"string"}}}`,
			want: []Change{{Kind: ChangeResponseFieldRemoved, Path: "response.email", Breaking: true}, {Kind: ChangeResponseFieldAdded, Path: "response.phone"}}},
		{name: "object body member removed: once, at the top level",
			old:  `{"type":"object","properties":{"body":{"type":"object","properties":{"name":{"type":"string"},"tag":{"type":"string"}}},"name":{"type":"string"},"tag":{"type":"string"}}}`,
			new:  `{"type":"object","properties":{"body":{"type":"object","properties":{"name":{"type":"string"}}},"name":{"type":"string"}}}`,
			want: []Change{{Kind: ChangeParameterRemoved, Path: "tag", Breaking: true}}},
		{name: "response type changed", old: diffBase, new: diffBase,
			oout: `{"type":"object","properties":{"total":{"type":"integer"}}}`,
			nout: `{"type":"object","properties":{"total":{"type":"string"}}}`,
			want: []Change{{Kind: ChangeTypeChanged, Path: "response.total", Breaking: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := diffOp("x", tc.old, tc.oout), diffOp("x", tc.new, tc.nout)
			got := DiffOperation(&a, &b)
			for i := range got {
				if got[i].Detail == "" {
					t.Errorf("%s: no detail", got[i].Kind)
				}
				got[i].Detail = ""
			}
			// Sort by path then kind for a stable comparison.
			sortChanges(got)
			sortChanges(tc.want)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func sortChanges(cs []Change) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && (cs[j].Path < cs[j-1].Path || cs[j].Path == cs[j-1].Path && cs[j].Kind < cs[j-1].Kind); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

func TestDiffOperations(t *testing.T) {
	old := []Operation{diffOp("a", diffBase, ""), diffOp("b", diffBase, ""), diffOp("c", diffBase, "")}
	changed := `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]},"q":{"type":"string"}},"required":["id"]}`
	d := DiffOperations(old, []Operation{diffOp("a", diffBase, ""), diffOp("c", changed, ""), diffOp("d", diffBase, "")})
	if diff := cmp.Diff([]string{"d"}, d.Added); diff != "" {
		t.Errorf("added: %s", diff)
	}
	if diff := cmp.Diff([]string{"b"}, d.Removed); diff != "" {
		t.Errorf("removed: %s", diff)
	}
	if len(d.Changed) != 1 || d.Changed[0].Operation != "c" || d.Changed[0].Breaking {
		t.Errorf("changed: %+v", d.Changed)
	}
	if !d.Breaking() {
		t.Error("a removed operation is breaking")
	}
	nb := DiffOperations(old, append(old[:3:3], diffOp("e", diffBase, "")))
	if nb.Breaking() || nb.Empty() || len(nb.Added) != 1 {
		t.Errorf("an added operation: %+v", nb)
	}
	if same := DiffOperations(old, old); !same.Empty() {
		t.Errorf("the same operations differ: %+v", same)
	}
}

func TestDiffGraphQLArgs(t *testing.T) {
	gql := func(argType string, required bool) Operation {
		in := `{"type":"object","properties":{"id":{"type":"string"}}}`
		if required {
			in = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
		}
		return Operation{ID: "query_book", Input: json.RawMessage(in),
			GraphQL: &GraphQLBinding{Root: "query", Field: "book", Args: []Arg{{Name: "id", Type: argType, Required: required}}}}
	}
	for _, tc := range []struct {
		name     string
		old, new Operation
		want     []string
	}{
		{"same", gql("ID", false), gql("ID", false), nil},
		{"ID to String: the same JSON type", gql("ID", false), gql("String", false), []string{"type_changed id"}},
		{"made non-null", gql("ID", false), gql("ID!", true), []string{"required_added id"}},
		{"made nullable", gql("ID!", true), gql("ID", false), []string{"required_removed id"}},
		{"a list", gql("ID", false), gql("[ID]", false), []string{"type_changed id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range DiffOperation(&tc.old, &tc.new) {
				got = append(got, c.Kind+" "+c.Path)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("changes (-want +got):\n%s", diff)
			}
		})
	}
}
