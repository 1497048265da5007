package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// auditActionInCode matches where the code names an audit record's action:
// a record's Action field, a route's action, a workflow's auditRecord.
var auditActionInCode = regexp.MustCompile(`(?:\b[Aa]ction:\s*|auditRecord\([^,()]+,\s*)"([a-z_]+\.[a-z_]+)"`)

// TestAuditActionsAreDocumented keeps docs/audit.md's list of actions equal
// to the actions the code writes, both ways.
func TestAuditActionsAreDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	inCode := map[string]string{}
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.Contains(path, "storetest") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range auditActionInCode.FindAllSubmatch(src, -1) {
				inCode[string(m[1])] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(inCode) < 30 {
		t.Fatalf("found only %d audit actions in the code: does the pattern still match how records are made?", len(inCode))
	}

	doc, err := os.ReadFile(filepath.Join(root, "docs", "audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "- `action` names what was done:")
	end := strings.Index(text, "- No token, secret or tool response body")
	if start < 0 || end < start {
		t.Fatal("docs/audit.md has no list of actions between \"- `action` names what was done:\" and \"- No token…\"")
	}
	inDocs := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z_]+\\.[a-z_]+)`").FindAllStringSubmatch(text[start:end], -1) {
		inDocs[m[1]] = true
	}

	var undocumented, unknown []string
	for a, path := range inCode {
		if !inDocs[a] {
			undocumented = append(undocumented, a+" ("+path+")")
		}
	}
	for a := range inDocs {
		if _, ok := inCode[a]; !ok {
			unknown = append(unknown, a)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unknown)
	if len(undocumented) > 0 {
		t.Errorf("actions the code writes that docs/audit.md does not list: %s", strings.Join(undocumented, ", "))
	}
	if len(unknown) > 0 {
		t.Errorf("actions docs/audit.md lists that the code never writes: %s", strings.Join(unknown, ", "))
	}
}
