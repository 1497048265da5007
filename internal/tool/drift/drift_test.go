package drift

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/tool"
)

func op(id, input, output string) tool.Operation {
	o := tool.Operation{ID: id, Input: json.RawMessage(input)}
	if output != "" {
		o.Output = json.RawMessage(output)
	}
	return o
}

const base = `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},
	"state":{"type":"string","enum":["open","closed","all"]}},"required":["id"]}`

func TestOperation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old, new   string
		oout, nout string
		want       []Change
	}{
		{name: "unchanged", old: base, new: base},
		{name: "description only", old: `{"type":"object","properties":{"a":{"type":"string","description":"x"}}}`,
			new: `{"type":"object","properties":{"a":{"type":"string","description":"y"}}}`},
		{name: "parameter removed", old: base,
			new: `{"type":"object","properties":{"id":{"type":"string"},"state":{"type":"string","enum":["open","closed","all"]}},"required":["id"]}`,
			want: []Change{{Kind: ParameterRemoved, Path: "limit", Breaking: true}}},
		{name: "parameter renamed", old: base,
			new: `{"type":"object","properties":{"id":{"type":"string"},"max":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]}},"required":["id"]}`,
			want: []Change{{Kind: ParameterRenamed, Path: "limit", Breaking: true}}},
		{name: "new required and optional", old: base,
			new: `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]},
				"org":{"type":"string"},"page":{"type":"integer"}},"required":["id","org"]}`,
			want: []Change{{Kind: RequiredAdded, Path: "org", Breaking: true}, {Kind: ParameterAdded, Path: "page"}}},
		{name: "made required, made optional", old: base,
			new: `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]}},"required":["limit"]}`,
			want: []Change{{Kind: RequiredRemoved, Path: "id"}, {Kind: RequiredAdded, Path: "limit", Breaking: true}}},
		{name: "type and format", old: `{"type":"object","properties":{"n":{"type":"integer"},"at":{"type":"string","format":"date"}}}`,
			new:  `{"type":"object","properties":{"n":{"type":"string"},"at":{"type":"string","format":"date-time"}}}`,
			want: []Change{{Kind: FormatChanged, Path: "at", Breaking: true}, {Kind: TypeChanged, Path: "n", Breaking: true}}},
		{name: "enum narrowed and widened", old: base,
			new: `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","draft"]}},"required":["id"]}`,
			want: []Change{{Kind: EnumNarrowed, Path: "state", Breaking: true}, {Kind: EnumWidened, Path: "state"}}},
		{name: "enum widened only", old: base,
			new: `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all","draft"]}},"required":["id"]}`,
			want: []Change{{Kind: EnumWidened, Path: "state"}}},
		{name: "nested and items", old: `{"type":"object","properties":{"to":{"type":"object","properties":{"city":{"type":"string"}}},"tags":{"type":"array","items":{"type":"string"}}}}`,
			new:  `{"type":"object","properties":{"to":{"type":"object","properties":{"city":{"type":"integer"}}},"tags":{"type":"array","items":{"type":"integer"}}}}`,
			want: []Change{{Kind: TypeChanged, Path: "tags[]", Breaking: true}, {Kind: TypeChanged, Path: "to.city", Breaking: true}}},
		{name: "response field removed and added", old: base, new: base,
			oout: `{"type":"object","properties":{"id":{"type":"string"},"email":{"type":"string"}}}`,
			nout: `{"type":"object","properties":{"id":{"type":"string"},"phone":{"type":"string"}}}`,
			want: []Change{{Kind: ResponseFieldRemoved, Path: "response.email", Breaking: true}, {Kind: ResponseFieldAdded, Path: "response.phone"}}},
		{name: "response type changed", old: base, new: base,
			oout: `{"type":"object","properties":{"total":{"type":"integer"}}}`,
			nout: `{"type":"object","properties":{"total":{"type":"string"}}}`,
			want: []Change{{Kind: TypeChanged, Path: "response.total", Breaking: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := op("x", tc.old, tc.oout), op("x", tc.new, tc.nout)
			got := Operation(&a, &b)
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

func TestOperations(t *testing.T) {
	old := []tool.Operation{op("a", base, ""), op("b", base, ""), op("c", base, "")}
	changed := `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"},"state":{"type":"string","enum":["open","closed","all"]},"q":{"type":"string"}},"required":["id"]}`
	d := Operations(old, []tool.Operation{op("a", base, ""), op("c", changed, ""), op("d", base, "")})
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
	nb := Operations(old, append(old[:3:3], op("e", base, "")))
	if nb.Breaking() || nb.Empty() || len(nb.Added) != 1 {
		t.Errorf("an added operation: %+v", nb)
	}
	if same := Operations(old, old); !same.Empty() {
		t.Errorf("the same operations differ: %+v", same)
	}
}
