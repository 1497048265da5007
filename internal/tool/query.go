package tool

import (
	"math/bits"
	"slices"
	"strings"
	"unicode"
)

// How people ask for an operation is not how operations are named: "spin
// up a repository" means repos/create-for-authenticated-user, "show a
// pod's log" readCoreV1NamespacedPodLog. Here the query side learns the
// vocabulary of actions, and the index side what an operation's HTTP
// method and path shape do (shapeOf).

// synonymWeight is what a word counts for when it matches through the
// action vocabulary rather than as typed, so that the word itself wins
// over a synonym where both match (add-labels above create-label for
// "add labels").
const synonymWeight = 0.8

// actions are the verbs operation ids use (create, get, list, update,
// delete, search), with the words people use for them. A word may mean
// more than one ("show" a thing or a list of them).
var actions = []struct {
	// ids are the words operation ids use for the action.
	ids []string
	// said are the words people use for it, ids' words included.
	said []string
}{
	{[]string{"create", "add"}, []string{"create", "add", "make", "new", "open", "publish", "start", "file", "cut",
		"post", "register", "submit", "insert", "launch", "raise", "leave", "write", "place", "store", "save"}},
	{[]string{"get", "read", "describe"}, []string{"get", "read", "describe", "look", "lookup", "show", "fetch",
		"find", "view", "see", "retrieve", "display", "check", "inspect"}},
	{[]string{"list", "describe"}, []string{"list", "describe", "show", "find", "view", "see", "browse", "every",
		"enumerate"}},
	{[]string{"update", "patch", "replace", "set"}, []string{"update", "patch", "replace", "set", "change", "edit",
		"rename", "modify", "push", "alter", "move", "close"}},
	{[]string{"delete", "remove", "cancel"}, []string{"delete", "remove", "drop", "close", "destroy", "erase",
		"cancel", "kill", "stop", "discard", "abort"}},
	{[]string{"search"}, []string{"search", "find", "lookup", "query"}},
	{[]string{"transfer"}, []string{"transfer", "move"}},
	{[]string{"request"}, []string{"request", "ask"}},
	{[]string{"add"}, []string{"give", "grant"}},
}

// things are the words people use for what operations name otherwise.
// Unlike actions, two of them in a query stay two words.
var things = map[string][]string{
	"bug": {"issue"}, "ticket": {"issue"}, "feedback": {"review", "comment"},
	"someone": {"user"}, "somebody": {"user"}, "person": {"user"}, "people": {"user"},
	"me": {"authenticated", "viewer", "current"}, "my": {"authenticated", "viewer", "current"},
	"own": {"authenticated", "viewer", "current"}, "mine": {"authenticated", "viewer", "current"},
}

// phrases are what people say in more than one word (or in an
// abbreviation), with the words operations use for it.
var phrases = map[string]string{
	"spin up": "create", "set up": "create", "sign up": "create", "roll out": "create", "look up": "get",
	"sign in": "login", "log in": "login", "sign out": "logout", "log out": "logout", "signed in": "my",
	"logged in": "my",
	"turn on":   "enable", "turn off": "disable", "pr": "pull request", "prs": "pull requests",
}

// said maps a word people use, as Terms gives it, to the words ids use for
// the same action.
var said = func() map[string][]string {
	m := map[string][]string{}
	for _, a := range actions {
		for _, w := range a.said {
			for _, id := range a.ids {
				w, id := stem(w), stem(id)
				if !slices.Contains(m[w], id) {
					m[w] = append(m[w], id)
				}
			}
		}
	}
	for w, ids := range things {
		for _, id := range ids {
			m[stem(w)] = append(m[stem(w)], stem(id))
		}
	}
	return m
}()

// An alt is a word an operation may hold for one word of a query, and what
// matching it counts for.
type alt struct {
	term   string
	weight float64
}

// A queryTerm is one word of a query: the words an operation may hold for
// it, and how much it counts.
type queryTerm struct {
	alts []alt
	// weight is 1 for a word saying what is wanted, contextWeight for one
	// saying where ("in a project").
	weight float64
	// action is set for a word of the action vocabulary.
	action bool
}

// contextWeight is what a word after a preposition counts for: "file a
// bug in a project" asks for an issue, not a project.
const contextWeight = 0.6

// prepositions end what a query asks for and begin where.
var prepositions = map[string]bool{"in": true, "on": true, "to": true, "from": true, "for": true, "of": true,
	"into": true, "at": true, "with": true, "by": true, "inside": true, "within": true}

// queryTerms splits a query into its words, each with the words that mean
// the same action. Words meaning the same actions ("spin up a new …") are
// one word, so that saying an action twice does not count twice.
func queryTerms(q string) []queryTerm {
	var groups []queryTerm
	var keys []string
	weight := 1.0
	plural := false
	for _, raw := range strings.Fields(rewritePhrases(q)) {
		if prepositions[strings.ToLower(raw)] && len(groups) > 0 {
			weight = contextWeight
		}
		for _, w := range Terms(raw) {
			ids := said[w]
			key := w
			if len(ids) > 0 && things[w] == nil {
				key = strings.Join(ids, " ")
			} else if isPlural(raw) {
				plural = true
			}
			k := slices.Index(keys, key)
			if k < 0 {
				if len(groups) == maxQueryTerms {
					continue
				}
				keys = append(keys, key)
				groups = append(groups, queryTerm{weight: weight})
				k = len(groups) - 1
			}
			g := &groups[k]
			g.action = g.action || key != w
			g.alts = addAlt(g.alts, alt{w, 1})
			for _, id := range ids {
				g.alts = addAlt(g.alts, alt{id, synonymWeight})
			}
		}
	}
	// "Show pets" asks for a list, "show a pet" for one.
	if plural {
		for k, g := range groups {
			if slices.ContainsFunc(g.alts, func(a alt) bool { return a.term == "list" }) {
				groups[k].alts = slices.DeleteFunc(g.alts, func(a alt) bool { return a.weight < 1 && (a.term == "get" || a.term == "read") })
			}
		}
	}
	return groups
}

// isPlural reports whether a word as written is an English plural.
func isPlural(raw string) bool {
	w := strings.ToLower(raw)
	return len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is")
}

// addAlt adds a to g, keeping the higher weight of a word already there.
func addAlt(g []alt, a alt) []alt {
	if i := slices.IndexFunc(g, func(b alt) bool { return b.term == a.term }); i >= 0 {
		g[i].weight = max(g[i].weight, a.weight)
		return g
	}
	return append(g, a)
}

// rewritePhrases replaces the phrases of q by the words operations use for
// them; the other words are kept as written, so identifiers keep their case.
func rewritePhrases(q string) string {
	words := strings.FieldsFunc(q, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := make([]string, 0, len(words))
	for i := 0; i < len(words); i++ {
		if i+1 < len(words) {
			if to, ok := phrases[strings.ToLower(words[i]+" "+words[i+1])]; ok {
				out = append(out, to)
				i++
				continue
			}
		}
		if to, ok := phrases[strings.ToLower(words[i])]; ok {
			out = append(out, to)
			continue
		}
		out = append(out, words[i])
	}
	return strings.Join(out, " ")
}

// A shape is what an operation's binding says it does, in the words of the
// action vocabulary: POST on a collection creates one of it, GET on an item
// reads one and on a collection lists them, PUT and PATCH update, DELETE
// deletes; a GraphQL query field gets or lists what it is named after.
type shape struct {
	// does is what it does, a bit per word of shapeActions.
	does uint8
	// resource is the index in the index's resources of the (stemmed)
	// last word naming what it acts on: the path's last segment that is
	// not a parameter, the query field's name; -1 for none.
	resource int
}

// shapeActions are the ids' words (stemmed) for what a shape does.
var shapeActions = [...]string{"creat", "get", "list", "updat", "delet"}

const (
	doesCreate uint8 = 1 << iota
	doesGet
	doesList
	doesUpdate
	doesDelete
)

// shapeOf returns what op's binding does, and the word naming what it
// does it to.
func shapeOf(op *Operation) (does uint8, resource string) {
	switch {
	case op.HTTP != nil:
		segs := strings.Split(op.HTTP.Path, "/")
		for _, seg := range slices.Backward(segs) {
			if seg != "" && !strings.Contains(seg, "{") {
				if ws := Terms(seg); len(ws) > 0 {
					resource = ws[len(ws)-1]
				}
				break
			}
		}
		item := strings.HasSuffix(op.HTTP.Path, "}")
		switch strings.ToUpper(op.HTTP.Method) {
		case "POST":
			if !item {
				does = doesCreate
			}
		case "GET":
			does = doesList
			if item {
				does = doesGet
			}
		case "PUT":
			// PUT creates the item at its path, or replaces it.
			does = doesUpdate | doesCreate
		case "PATCH":
			does = doesUpdate
		case "DELETE":
			does = doesDelete
		}
		return does, resource
	case op.GraphQL != nil && op.GraphQL.Root == "query":
		if ws := Terms(op.GraphQL.Field); len(ws) > 0 {
			return doesGet | doesList, ws[len(ws)-1]
		}
	}
	return 0, ""
}

// actionText is the words for what a shape does.
func actionText(does uint8) string {
	var ws []string
	for i, w := range shapeActions {
		if does&(1<<i) != 0 {
			ws = append(ws, w)
		}
	}
	return strings.Join(ws, " ")
}

// asked is what a query asks of operations' shapes, worked out once per
// query: the query words naming each action, and those naming each
// resource met so far.
type asked struct {
	groups []queryTerm
	// actions are the query words naming each of shapeActions.
	actions [len(shapeActions)]uint64
	// resources are the query words, not of context, naming each of the
	// index's resources, once looked at (known).
	resources []uint64
	known     []bool
	names     []string
	// noAction is set when no query word names an action.
	noAction bool
}

func newAsked(groups []queryTerm, resources []string) *asked {
	a := &asked{groups: groups, resources: make([]uint64, len(resources)), known: make([]bool, len(resources)),
		names: resources, noAction: true}
	for k, g := range groups {
		for _, al := range g.alts {
			if i := slices.Index(shapeActions[:], al.term); i >= 0 {
				a.actions[i] |= 1 << k
			}
		}
		if g.action {
			a.noAction = false
		}
	}
	return a
}

// does is the query words naming what sh does.
func (a *asked) does(sh shape) uint64 {
	var m uint64
	for i := range shapeActions {
		if sh.does&(1<<i) != 0 {
			m |= a.actions[i]
		}
	}
	return m
}

// fits reports whether the query asks for what sh does: one of its words
// names sh's action and another, not a word of context, its resource. A
// query naming no action that starts with the resource asks to make one:
// "comment on an issue", "star a repository", "evict a pod".
func (a *asked) fits(sh shape) bool {
	if sh.does == 0 || sh.resource < 0 || len(a.groups) == 0 {
		return false
	}
	if !a.known[sh.resource] {
		name := a.names[sh.resource]
		for k, g := range a.groups {
			if g.weight == 1 && slices.ContainsFunc(g.alts, func(al alt) bool { return related(al.term, name) }) {
				a.resources[sh.resource] |= 1 << k
			}
		}
		a.known[sh.resource] = true
	}
	res := a.resources[sh.resource]
	if a.noAction {
		return res&1 != 0 && sh.does&doesCreate != 0
	}
	act := a.does(sh)
	// one word for the action and another for the resource
	return act != 0 && res != 0 && !(act == res && bits.OnesCount64(act) == 1)
}
