package demo

import (
	"fmt"
	"strings"
	"testing"
)

// TestReadyCountsTheWholeHistory: a demo started again on the same data
// says how many workflows its history holds, not only those it just made.
func TestReadyCountsTheWholeHistory(t *testing.T) {
	six := map[string]string{}
	for i := range 6 {
		six[fmt.Sprintf("tx_100%d", i+1)] = fmt.Sprintf("wf_%d", i)
	}
	for _, tc := range []struct {
		s    Seeded
		want string
	}{
		{Seeded{Workflows: six, History: 6}, "and 6 workflows make its history.\n"},
		{Seeded{Workflows: six, History: 17}, "and 17 workflows make its history (6 of them invoked just now).\n"},
		{Seeded{Workflows: six, History: 2000, HistoryMore: true}, "and over 2000 workflows make its history (6 of them invoked just now).\n"},
		{Seeded{Workflows: six, History: 7, Waiting: "wf_7"}, "and 7 workflows make its history, one a refund waiting for approval.\n"},
		{Seeded{Workflows: six, History: 18, Waiting: "wf_7"}, "and 18 workflows make its history (7 of them invoked just now), one a refund waiting for approval.\n"},
	} {
		var b strings.Builder
		Ready(&b, "http://127.0.0.1:8080", "tok", "approver", &tc.s)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("history %d: the ready block lacks %q:\n%s", tc.s.History, tc.want, b.String())
		}
	}
}
