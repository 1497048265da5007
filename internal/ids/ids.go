// Package ids makes the prefixed ULID identifiers of agentplane's resources
// (tool_…, wf_…, rpl_…, aud_…). ULIDs sort by creation time, so ids double as
// stable cursor keys.
package ids

import (
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Prefixes of the resource ids.
const (
	Tool     = "tool_"
	Workflow = "wf_"
	Replay   = "rpl_"
	Batch    = "rpb_"
	Schedule = "sch_"
	Webhook  = "whk_"
	Audit    = "aud_"
	Request  = "req_"
	Client   = "cli_"
	Key      = "key_"
	Model    = "mdl_"
	Dataset  = "ds_"
	Rollout  = "ro_"
)

var (
	mu      sync.Mutex
	entropy = ulid.Monotonic(rand.Reader, 0)
)

// New returns prefix + a new ULID. Ids made in one process are strictly increasing.
func New(prefix string) string {
	return NewAt(prefix, time.Now())
}

// NewAt returns prefix + a new ULID for the given time.
func NewAt(prefix string, t time.Time) string {
	mu.Lock()
	id := ulid.MustNew(ulid.Timestamp(t), entropy)
	mu.Unlock()
	return prefix + id.String()
}

// Floor is the least id of prefix that NewAt can make at t or later: a
// lower bound on an id column for "made since t".
func Floor(prefix string, t time.Time) string {
	var u ulid.ULID
	if err := u.SetTime(ulid.Timestamp(t)); err != nil {
		return prefix // before 1970 or past 10889: no bound
	}
	return prefix + u.String()
}

// Valid reports whether s is prefix followed by a well-formed ULID.
func Valid(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return false
	}
	_, err := ulid.ParseStrict(rest)
	return err == nil
}
