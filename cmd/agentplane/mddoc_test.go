package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// fenceLine is a line that opens or closes a fenced code block.
	fenceLine = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	// mdLink is an inline link or image outside code: [text](target).
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// TestMarkdownIsWellFormed reads every Markdown page of the repository as a
// reader's renderer would: each fenced code block closes on a line of its
// own (a closing fence with words after it does not close, and the rest of
// the page would read as code), and each relative link names a file that
// exists and, with #anchor, a heading of that page.
func TestMarkdownIsWellFormed(t *testing.T) {
	root := filepath.Join("..", "..")
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 20 {
		t.Fatalf("found %d Markdown pages under %s, want the repository's", len(pages), root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		src, err := os.ReadFile(path)
		if err == nil {
			for _, h := range headings(string(src)) {
				slug := slugOf(h)
				for n := 1; a[slug]; n++ { // GitHub numbers repeated headings
					slug = slugOf(h) + "-" + strconv.Itoa(n)
				}
				a[slug] = true
			}
		}
		anchors[path] = a
		return a
	}
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		open := prose(string(src), func(i int, line string) {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: the link %q names %s, which does not exist", rel, i+1, target, file)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: the link %q names #%s, which is not a heading of %s", rel, i+1, target, anchor, filepath.Base(dest))
				}
			}
		}, func(i int, line string) {
			t.Errorf("%s:%d: %q has words after its closing fence, so it does not close the code block: put them on a line of their own", rel, i+1, line)
		})
		if open != "" {
			t.Errorf("%s: a code block opened with %s is never closed", rel, open)
		}
	}
}

// prose calls line with each line of a Markdown page outside its fenced
// code blocks, and wordyClose with each would-be closing fence followed by
// words, which (as in CommonMark) does not close its block. It returns the
// fence of a block left open at the end.
func prose(src string, line, wordyClose func(i int, text string)) (open string) {
	for i, text := range strings.Split(src, "\n") {
		m := fenceLine.FindStringSubmatch(text)
		switch {
		case m == nil && open == "":
			line(i, text)
		case m == nil:
		case open == "":
			open = m[1]
		case m[1][0] != open[0] || len(m[1]) < len(open):
		case strings.TrimSpace(m[2]) != "":
			if wordyClose != nil {
				wordyClose(i, text)
			}
		default:
			open = ""
		}
	}
	return open
}

// headings returns the text of a page's ATX headings outside code blocks.
func headings(src string) []string {
	var hs []string
	prose(src, func(_ int, line string) {
		if text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			hs = append(hs, strings.TrimSpace(text))
		}
	}, nil)
	return hs
}

// slugOf is a heading's anchor as GitHub makes it: lower case, inline code
// and link marks dropped, punctuation other than hyphens and underscores
// removed, spaces turned into hyphens.
func slugOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r > 0x7f && !isPunct(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isPunct is the non-ASCII punctuation the docs' headings use.
func isPunct(r rune) bool {
	return strings.ContainsRune("–—→÷×…‘’“”·", r)
}
