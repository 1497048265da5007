package tool

import (
	"cmp"
	"container/list"
	"maps"
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
	// shapeBonus is what an operation whose method and path do what the
	// query asks for adds (POST /repos for "create a repository").
	shapeBonus = 4.0
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
	// idWords are idVocab's words in order, to find those a query word
	// is a prefix of without reading them all.
	idWords []string
	// shapes say what each operation's binding does, and to what: one of
	// resources.
	shapes    []shape
	resources []string
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
		lengths: make([]float64, len(ops)), ids: make([]string, len(ops)), idTerms: make([][]string, len(ops)), shapes: make([]shape, len(ops))}
	var total float64
	resourceIndex := map[string]int{}
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
		does, res := shapeOf(op)
		add(actionText(does), weightPath)
		ix.shapes[i] = shape{does: does, resource: -1}
		if res != "" {
			r, ok := resourceIndex[res]
			if !ok {
				r = len(ix.resources)
				resourceIndex[res] = r
				ix.resources = append(ix.resources, res)
			}
			ix.shapes[i].resource = r
		}
		add(op.Description, weightDescription)
		for t, f := range tf {
			ix.postings[t] = append(ix.postings[t], posting{op: i, tf: f})
		}
		total += ix.lengths[i]
	}
	if len(ops) > 0 {
		ix.avgLen = total / float64(len(ops))
	}
	ix.idWords = slices.Sorted(maps.Keys(ix.idVocab))
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

// Search ranks the operations matching any word of q, or a word meaning
// the same action (queryTerms), of kind when kind is not empty, best first;
// ties keep index order. An operation whose id is the query, or holds every
// word of it, ranks above the others, and one whose method and path do what
// the query asks (POST /user/repos for "create a repository") above those
// that only hold its words.
func (ix *SearchIndex) Search(q, kind string) []Hit {
	groups := queryTerms(q)
	folded := compact(q)
	if len(groups) == 0 && folded == "" {
		return ix.All(kind)
	}
	var whole float64 // the query's words' weights together
	for _, g := range groups {
		whole += g.weight
	}
	n := len(ix.refs)
	scores := make([]float64, n)
	matched := make([]float64, n)
	found := make([]bool, n)
	// A query word scores, for each operation, its best match among the
	// words that mean the same (create for "make").
	best := make([]float64, n)
	seen := make([]int, n)
	for i := range seen {
		seen[i] = -1
	}
	var touched []int
	for k, g := range groups {
		touched = touched[:0]
		for _, a := range g.alts {
			ps := ix.postings[a.term]
			if len(ps) == 0 {
				continue
			}
			idf := math.Log(1 + (float64(n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
			for _, p := range ps {
				norm := bm25K1 * (1 - bm25B + bm25B*ix.lengths[p.op]/ix.avgLen)
				s := g.weight * a.weight * idf * p.tf * (bm25K1 + 1) / (p.tf + norm)
				if seen[p.op] != k {
					seen[p.op], best[p.op] = k, s
					touched = append(touched, p.op)
				} else {
					best[p.op] = max(best[p.op], s)
				}
			}
		}
		for _, op := range touched {
			scores[op] += best[op]
			matched[op] += g.weight
			found[op] = true
		}
	}
	// An id made of the query's words says most about what an operation
	// does: the more of the query it holds, and the fewer other words, the
	// better (issues/create for "create issue", not
	// reactions/create-for-issue). A word matches an id word that is its
	// prefix or that it is a prefix of (repo, repository); a word matching
	// only through a synonym counts for less.
	exact := make([]uint64, n)
	near := make([]uint64, n)
	idHits := make([]int, n)
	type masks struct{ exact, near uint64 }
	words := map[string]masks{}
	for k, g := range groups {
		for _, a := range g.alts {
			ix.relatedIDWords(a.term, func(u string) {
				m := words[u]
				if a.weight == 1 {
					m.exact |= 1 << k
				} else {
					m.near |= 1 << k
				}
				words[u] = m
			})
		}
	}
	for u, m := range words {
		for _, p := range ix.idVocab[u] {
			exact[p.op] |= m.exact
			near[p.op] |= m.near
			idHits[p.op] += p.count
		}
	}
	asked := newAsked(groups, ix.resources)
	bonus := make([]float64, n)
	for i := range n {
		if exact[i]|near[i] != 0 {
			qm := weightOf(groups, exact[i]) + synonymWeight*weightOf(groups, near[i]&^exact[i])
			bonus[i] = idBonus * qm / whole * float64(idHits[i]) / float64(len(ix.idTerms[i]))
			matched[i] = max(matched[i], qm)
			found[i] = true
		}
		if asked.fits(ix.shapes[i]) {
			bonus[i] += shapeBonus
			found[i] = true
		}
		// The operation whose id is the query, however it is written
		// (listPets, list_pets, LISTPETS), comes first.
		if ix.ids[i] == folded {
			matched[i] = whole
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
		if whole > 0 {
			coverage := matched[op] / whole
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
	return hits
}

// weightOf is the weight of the query words in mask.
func weightOf(groups []queryTerm, mask uint64) float64 {
	var w float64
	for ; mask != 0; mask &= mask - 1 {
		w += groups[bits.TrailingZeros64(mask)].weight
	}
	return w
}

// relatedIDWords calls f with each id word related to t: t itself and the
// words it is a prefix of, then the words of three letters or more that
// are a prefix of it.
func (ix *SearchIndex) relatedIDWords(t string, f func(u string)) {
	if len(t) < 3 {
		if _, ok := ix.idVocab[t]; ok {
			f(t)
		}
		return
	}
	i, _ := slices.BinarySearch(ix.idWords, t)
	for ; i < len(ix.idWords) && strings.HasPrefix(ix.idWords[i], t); i++ {
		f(ix.idWords[i])
	}
	for n := 3; n < len(t); n++ {
		if _, ok := ix.idVocab[t[:n]]; ok {
			f(t[:n])
		}
	}
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

// stem drops a plural's ending and a verb's, and a final "e", the same way
// for an operation's words and a query's, so that the forms of a word are
// one: issues and issue → issu, policies → policy, statuses → status,
// created, creating and create → creat, running → run. Words ending in "ss"
// or "us" keep their "s".
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "uses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1] // and on: settings → setting → set
	}
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ied"):
		return w[:len(w)-3] + "y"
	case len(w) > 5 && strings.HasSuffix(w, "ing") && hasVowel(w[:len(w)-3]):
		w = undouble(w[:len(w)-3])
	case len(w) > 4 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed") && hasVowel(w[:len(w)-2]):
		w = undouble(w[:len(w)-2])
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") && !strings.HasSuffix(w, "ee") {
		w = w[:len(w)-1]
	}
	return w
}

// undouble drops the second of a doubled final consonant a verb ending
// leaves (runn → run, tagg → tag), but not of l, s or z (fill, pass).
func undouble(w string) string {
	if n := len(w); n > 2 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

func hasVowel(w string) bool { return strings.ContainsAny(w, "aeiouy") }

// stopWords say nothing about which operation is meant.
var stopWords = map[string]bool{
	"the": true, "an": true, "of": true, "for": true, "to": true, "in": true, "on": true, "by": true,
	"and": true, "or": true, "with": true, "is": true, "it": true, "this": true, "that": true, "be": true,
	"from": true, "at": true, "as": true, "all": true,
	"its": true, "their": true, "your": true, "our": true, "another": true,
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
