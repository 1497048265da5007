package tool

import (
	"cmp"
	"container/list"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// OperationRef is an operation as search results show it: enough to pick
// one and call it, without its schemas.
type OperationRef struct {
	ID      string `json:"id"`
	Tool    string `json:"tool"`
	Kind    string `json:"kind"`
	Method  string `json:"method,omitempty"`
	Path    string `json:"path,omitempty"`
	Root    string `json:"root,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// Hit is one search result: the operation and how well it matches.
type Hit struct {
	OperationRef
	// Score orders results, higher first; 0 when listing without a query.
	Score float64
	// Index is the operation's position in the indexed list.
	Index int
}

// Field weights: a word in the operation's id counts most, then its
// summary, then its path, GraphQL field, tags and parameter names, then its
// description.
const (
	weightID          = 4.0
	weightSummary     = 2.5
	weightPath        = 1.5
	weightDescription = 1.0
	// bm25K1 and bm25B are BM25's saturation and length normalisation.
	bm25K1 = 1.2
	bm25B  = 0.6
	// idBonus is what an id made of exactly the query's words adds.
	idBonus = 8.0
	// maxQueryTerms bounds the words of a query that count.
	maxQueryTerms = 32
)

// related reports whether query word t and id word u name the same thing:
// equal, or one a prefix of the other of at least three letters.
func related(t, u string) bool {
	if t == u {
		return true
	}
	if len(u) >= 3 && strings.HasPrefix(t, u) || len(t) >= 3 && strings.HasPrefix(u, t) {
		return true
	}
	return false
}

// SearchIndex ranks the operations of one tool revision by words. It is
// built once per revision and only read afterwards, so it is safe for
// concurrent use.
type SearchIndex struct {
	refs []OperationRef
	// postings maps a term to the operations holding it and their
	// weighted term frequency.
	postings map[string][]posting
	// lengths are the operations' weighted lengths.
	lengths []float64
	avgLen  float64
	// ids are the operations' ids folded for exact matching.
	ids []string
	// idTerms are the words of each operation's id, and idVocab the
	// operations holding each id word (and how often).
	idTerms [][]string
	idVocab map[string][]idPosting
}

type idPosting struct {
	op, count int
}

type posting struct {
	op int
	tf float64
}

// NewSearchIndex indexes ops (of the tool named toolName) in their order.
func NewSearchIndex(toolName string, ops []Operation) *SearchIndex {
	ix := &SearchIndex{postings: map[string][]posting{}, idVocab: map[string][]idPosting{}, refs: make([]OperationRef, len(ops)),
		lengths: make([]float64, len(ops)), ids: make([]string, len(ops)), idTerms: make([][]string, len(ops))}
	var total float64
	for i := range ops {
		op := &ops[i]
		ix.refs[i] = refOf(toolName, op)
		ix.ids[i] = compact(op.ID)
		ix.idTerms[i] = Terms(op.ID)
		counts := map[string]int{}
		for _, u := range ix.idTerms[i] {
			counts[u]++
		}
		for u, c := range counts {
			ix.idVocab[u] = append(ix.idVocab[u], idPosting{op: i, count: c})
		}
		tf := map[string]float64{}
		add := func(text string, w float64) {
			for _, t := range Terms(text) {
				tf[t] += w
				ix.lengths[i] += w
			}
		}
		add(op.ID, weightID)
		add(op.Summary, weightSummary)
		add(PathText(op), weightPath)
		add(op.Description, weightDescription)
		for t, f := range tf {
			ix.postings[t] = append(ix.postings[t], posting{op: i, tf: f})
		}
		total += ix.lengths[i]
	}
	if len(ops) > 0 {
		ix.avgLen = total / float64(len(ops))
	}
	return ix
}

func refOf(toolName string, op *Operation) OperationRef {
	r := OperationRef{ID: op.ID, Tool: toolName, Kind: op.Kind, Summary: op.Summary}
	switch {
	case op.HTTP != nil:
		r.Method, r.Path = op.HTTP.Method, op.HTTP.Path
	case op.GraphQL != nil:
		r.Root = op.GraphQL.Root
	}
	return r
}

// PathText is what an operation's binding says about it: its path and
// parameter names, its GraphQL field and arguments, its SOAP element and
// parts.
func PathText(op *Operation) string {
	var b strings.Builder
	switch {
	case op.HTTP != nil:
		b.WriteString(op.HTTP.Path)
		for _, p := range op.HTTP.Params {
			b.WriteString(" " + p.Name)
		}
	case op.GraphQL != nil:
		b.WriteString(op.GraphQL.Field)
		for _, a := range op.GraphQL.Args {
			b.WriteString(" " + a.Name)
		}
	case op.SOAP != nil:
		b.WriteString(op.SOAP.Element)
		for _, p := range op.SOAP.Parts {
			b.WriteString(" " + p.Name)
		}
	}
	return b.String()
}

// Len is how many operations the index holds.
func (ix *SearchIndex) Len() int { return len(ix.refs) }

// Search ranks the operations matching any word of q (of kind, when kind
// is not empty), best first; ties keep index order. An operation whose id
// is the query, or holds every word of it, ranks above the others.
func (ix *SearchIndex) Search(q, kind string) []Hit {
	terms := Terms(q)
	folded := compact(q)
	if len(terms) == 0 && folded == "" {
		return ix.All(kind)
	}
	slices.Sort(terms)
	terms = slices.Compact(terms)
	if len(terms) > maxQueryTerms {
		terms = terms[:maxQueryTerms]
	}
	n := len(ix.refs)
	scores := make([]float64, n)
	matched := make([]int, n)
	found := make([]bool, n)
	for _, t := range terms {
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (float64(n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			norm := bm25K1 * (1 - bm25B + bm25B*ix.lengths[p.op]/ix.avgLen)
			scores[p.op] += idf * p.tf * (bm25K1 + 1) / (p.tf + norm)
			matched[p.op]++
			found[p.op] = true
		}
	}
	// An id made of the query's words says most about what an operation
	// does: the more of the query it holds, and the fewer other words, the
	// better (issues/create for "create issue", not
	// reactions/create-for-issue). A word matches an id word that is its
	// prefix or that it is a prefix of (repo, repository).
	qmask := make([]uint64, n)
	idHits := make([]int, n)
	for u, ps := range ix.idVocab {
		var mask uint64
		for k, t := range terms {
			if related(t, u) {
				mask |= 1 << k
			}
		}
		if mask == 0 {
			continue
		}
		for _, p := range ps {
			qmask[p.op] |= mask
			idHits[p.op] += p.count
		}
	}
	bonus := make([]float64, n)
	for i := range n {
		if qm := bits.OnesCount64(qmask[i]); qm > 0 {
			bonus[i] = idBonus * float64(qm) / float64(len(terms)) * float64(idHits[i]) / float64(len(ix.idTerms[i]))
			matched[i] = max(matched[i], qm)
			found[i] = true
		}
		// The operation whose id is the query, however it is written
		// (listPets, list_pets, LISTPETS), comes first.
		if ix.ids[i] == folded {
			matched[i] = len(terms)
			bonus[i] += 100
			found[i] = true
		}
	}
	// Rank small (operation, score) pairs, then build the hits: sorting
	// the hits themselves moves every operation's reference around.
	type ranked struct {
		op    int
		score float64
	}
	var order []ranked
	for op := range n {
		if !found[op] {
			continue
		}
		if kind != "" && ix.refs[op].Kind != kind {
			continue
		}
		s := scores[op]
		// Operations holding every word come first, then by how many.
		if len(terms) > 0 {
			coverage := float64(matched[op]) / float64(len(terms))
			s *= coverage * coverage
		}
		s += bonus[op]
		order = append(order, ranked{op, math.Round(s*1000) / 1000})
	}
	slices.SortFunc(order, func(a, b ranked) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return a.op - b.op
	})
	hits := make([]Hit, len(order))
	for i, r := range order {
		hits[i] = Hit{OperationRef: ix.refs[r.op], Score: r.score, Index: r.op}
	}
	if hits == nil {
		hits = []Hit{}
	}
	return hits
}

// MergeHits merges the ranked hits of several tools into one ranking:
// higher score first, then by tool name, then in each tool's own order. Each
// list must be as Search returns it; the merge moves each hit once.
func MergeHits(lists [][]Hit) []Hit {
	lists = slices.DeleteFunc(slices.Clone(lists), func(l []Hit) bool { return len(l) == 0 })
	slices.SortStableFunc(lists, func(a, b []Hit) int { return strings.Compare(a[0].Tool, b[0].Tool) })
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	out := make([]Hit, 0, total)
	heads := make([]int, len(lists))
	for len(out) < total {
		best := -1
		for i, l := range lists {
			if heads[i] < len(l) && (best < 0 || l[heads[i]].Score > lists[best][heads[best]].Score) {
				best = i
			}
		}
		out = append(out, lists[best][heads[best]])
		heads[best]++
	}
	return out
}

// All lists the operations (of kind, when not empty) in index order.
func (ix *SearchIndex) All(kind string) []Hit {
	hits := make([]Hit, 0, len(ix.refs))
	for i, r := range ix.refs {
		if kind == "" || r.Kind == kind {
			hits = append(hits, Hit{OperationRef: r, Index: i})
		}
	}
	return hits
}

// compact folds an identifier for exact comparison: lower case, letters
// and digits only.
func compact(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}

// Terms splits text into the words search compares: identifiers are split
// on case changes and every character that is not a letter or a
// digit (so "issues/create", "createIssue" and "create_issue" all give
// "create" and "issue"), words are lower-cased and a plural's ending is
// dropped. Words of one character and common English words are left out.
func Terms(text string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) > 1 {
			w := stem(strings.ToLower(string(word)))
			if !stopWords[w] {
				out = append(out, w)
			}
		}
		word = word[:0]
	}
	rs := []rune(text)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case len(word) > 0:
			prev := word[len(word)-1]
			switch {
			case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
				flush()
			case unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				flush() // "HTTPServer": "HTTP", then "Server"
			}
		}
		word = append(word, r)
	}
	flush()
	return out
}

// stem drops a plural's ending: issues → issue, policies → policy,
// statuses → status; words ending in "ss" or "us" keep theirs.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "uses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// stopWords say nothing about which operation is meant.
var stopWords = map[string]bool{
	"the": true, "an": true, "of": true, "for": true, "to": true, "in": true, "on": true, "by": true,
	"and": true, "or": true, "with": true, "is": true, "it": true, "this": true, "that": true, "be": true,
	"from": true, "at": true, "as": true, "me": true, "my": true, "all": true,
}

// IndexCache keeps the search indexes of the most recently searched tool
// revisions, so an index is built once per revision, not per query.
type IndexCache struct {
	mu    sync.Mutex
	max   int
	items map[string]*list.Element
	lru   *list.List
}

type cached struct {
	key string
	ix  *SearchIndex
}

// NewIndexCache keeps at most max indexes.
func NewIndexCache(max int) *IndexCache {
	return &IndexCache{max: max, items: map[string]*list.Element{}, lru: list.New()}
}

// Index returns the index of t's current revision, building it from
// load's operations when it is not cached.
func (c *IndexCache) Index(t *Tool, load func() ([]Operation, error)) (*SearchIndex, error) {
	key := t.Tenant + "\n" + t.ID + "\n" + strconv.Itoa(t.Revision) + "\n" + t.SpecSHA256
	c.mu.Lock()
	if e, ok := c.items[key]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cached).ix, nil
	}
	c.mu.Unlock()
	ops, err := load()
	if err != nil {
		return nil, err
	}
	ix := NewSearchIndex(t.Name, ops)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok { // built meanwhile by another request
		return e.Value.(*cached).ix, nil
	}
	c.items[key] = c.lru.PushFront(&cached{key: key, ix: ix})
	for c.lru.Len() > c.max {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.items, last.Value.(*cached).key)
	}
	return ix, nil
}
