package httpapi

import (
	"net/http"
	"testing"
)

func TestPrefersReadsRFC7240Headers(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		want    bool
	}{
		{[]string{"respond-async"}, true},
		{[]string{"RESPOND-ASYNC"}, true},
		{[]string{" wait=5 , respond-async ; x=1"}, true},
		{[]string{"return=minimal", "respond-async"}, true},
		{[]string{`handling="lenient, respond-async"`}, false},
		{[]string{`x="a\"b, respond-async"`}, false},
		{[]string{`x="a\"b", respond-async`}, true},
		{[]string{"respond-async=1"}, true},
		{[]string{"respond-asynchronously"}, false},
		{[]string{""}, false},
		{nil, false},
	} {
		h := http.Header{}
		for _, v := range tc.headers {
			h.Add("Prefer", v)
		}
		if got := prefers(h, preferAsync); got != tc.want {
			t.Errorf("Prefer %q: prefers respond-async = %v, want %v", tc.headers, got, tc.want)
		}
	}
}
