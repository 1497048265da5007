package llmtest

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

// event is a server-sent event: its name (none for Chat Completions) and
// its data, written as JSON.
type event struct {
	name string
	data any
}

// writeStream sends events as a text/event-stream, flushing each: the
// last held until a.HoldLast is closed, half of them then a broken
// connection when a.Truncate; done ends them with "data: [DONE]".
func writeStream(w http.ResponseWriter, r *http.Request, a Answer, events []event, done bool) {
	for k, vs := range a.Header {
		for _, x := range vs {
			w.Header().Add(k, x)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	for i, e := range events {
		if a.Truncate && i == len(events)/2 {
			panic(http.ErrAbortHandler) // the connection closes mid-stream
		}
		if i == len(events)-1 && a.HoldLast != nil {
			select {
			case <-a.HoldLast:
			case <-r.Context().Done():
				return
			}
		}
		data, _ := json.Marshal(e.data)
		if e.name != "" {
			_, _ = w.Write([]byte("event: " + e.name + "\n"))
		}
		_, _ = w.Write([]byte("data: " + string(data) + "\n\n"))
		flush()
	}
	if done {
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
		flush()
	}
}

// pieces cuts a text in two at a character boundary near its middle, as a
// model streams text in deltas; a text of one character or none is one
// piece.
func pieces(s string) []string {
	if utf8.RuneCountInString(s) < 2 {
		return []string{s}
	}
	mid := len(s) / 2
	for !utf8.RuneStart(s[mid]) {
		mid++
	}
	return []string{s[:mid], s[mid:]}
}
