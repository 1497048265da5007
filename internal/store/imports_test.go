package store_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// presentation are the packages a store must not import: the front doors
// and the templates they render. A store talks through domain types only.
var presentation = []string{
	"github.com/agentplane/agentplane/internal/console",
	"github.com/agentplane/agentplane/internal/web",
	"github.com/agentplane/agentplane/internal/httpapi",
}

// TestStoresImportNoPresentationPackage reads every Go file under
// internal/store, tests included, and fails on an import of a front door or
// presentation package.
func TestStoresImportNoPresentationPackage(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range presentation {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("%s imports %s: a store imports domain packages only", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
