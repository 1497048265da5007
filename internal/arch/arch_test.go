package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/agentplane/agentplane/"

// pkg is one package as `go list -json` describes it; Imports leaves out
// its tests' imports.
type pkg struct {
	ImportPath string
	Imports    []string
}

// Layers of internal/, from the bottom. A package may import packages of its
// own layer or below, never above; the rules after the table say the rest.
var (
	// frontDoors are the protocols' packages and their shared plumbing.
	frontDoors = []string{"httpapi", "frontdoor", "a2a", "mcp", "console", "gateway", "web"}
	// wireTypes are protocols' messages: leaves that a front door and the
	// domain's clients of the same protocol (tools) both import.
	wireTypes = []string{"a2a/wire"}
	// engines are the store's engines, which only cmd/ wires.
	engines = []string{"store/sqlite", "store/postgres"}
)

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "../../...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		var own []string
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				own = append(own, strings.TrimPrefix(imp, module))
			}
		}
		p.Imports = own
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; want the whole module", len(pkgs))
	}
	return pkgs
}

// under reports whether path is internal/<one of names> or below it.
func under(path string, names []string) bool {
	for _, n := range names {
		p := "internal/" + n
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if msg := refused(p.ImportPath, imp); msg != "" {
				t.Errorf("%s imports %s: %s", p.ImportPath, imp, msg)
			}
		}
	}
}

// refused says why from may not import to, or "" when it may.
func refused(from, to string) string {
	wiring := strings.HasPrefix(from, "cmd/") || strings.HasPrefix(from, "bench/")
	switch {
	case wiring:
		return ""
	case under(from, wireTypes):
		return "wire types are a leaf: they import nothing of agentplane's"
	case under(to, engines) && !under(from, engines):
		return "only cmd/ (and bench/) wire a store engine; code below talks to the domain's Store interfaces"
	case strings.HasPrefix(to, from+"/"), under(to, wireTypes):
		return "" // a package's own subpackages; a protocol's wire types
	case under(from, []string{"store"}) && under(to, frontDoors):
		return "a store imports domain packages only, never a front door or a presentation package"
	case under(from, []string{"frontdoor"}) && under(to, frontDoors) && !under(to, []string{"frontdoor"}):
		return "the shared plumbing imports no front door: front doors import it"
	case !under(from, frontDoors) && !under(from, []string{"store"}) && under(to, frontDoors):
		return "domain packages never import a front door"
	case under(from, []string{"a2a", "mcp", "console", "gateway"}) && under(to, []string{"httpapi"}):
		return "a front door takes the services it uses, not the REST server's private helpers"
	}
	return ""
}

func TestRulesRefuseWhatTheDocForbids(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"cmd/agentplane", "internal/store/sqlite", true},
		{"internal/httpapi", "internal/store/sqlite", false},
		{"internal/workflow", "internal/store/postgres", false},
		{"internal/store/sqlite", "internal/console", false},
		{"internal/store/postgres", "internal/httpapi", false},
		{"internal/frontdoor", "internal/httpapi", false},
		{"internal/workflow", "internal/httpapi", false},
		{"internal/mcp", "internal/httpapi", false},
		{"internal/httpapi", "internal/mcp", true},
		{"internal/mcp", "internal/frontdoor", true},
		{"internal/frontdoor", "internal/frontdoor/jsonbody", true},
		{"internal/store/sqlite", "internal/workflow", true},
		{"internal/frontdoor", "internal/frontdoor/jsonbody", true},
		{"internal/store", "internal/store/sqlite", false},
		{"internal/tool/call", "internal/a2a/wire", true},
		{"internal/tool/call", "internal/a2a", false},
		{"internal/a2a/wire", "internal/problem", false},
		{"internal/a2a", "internal/httpapi", false},
	} {
		got := refused(tc.from, tc.to) == ""
		if got != tc.ok {
			t.Errorf("%s → %s allowed = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}
