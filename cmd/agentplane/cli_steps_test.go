package main

import "testing"

// TestStepLineShowsTheErrorCodeAndAttempts prints a failed tool step's
// stable error_code after its error, and the attempts of a retried call.
func TestStepLineShowsTheErrorCodeAndAttempts(t *testing.T) {
	ev := map[string]any{"step": "1", "action": "fetch", "status": "error", "tool": "books", "operation": "getBalance",
		"error": "the API answered 503 Service Unavailable", "error_code": "upstream_error", "attempts": "3"}
	want := "   1  fetch                    error            books.getBalance  error: the API answered 503 Service Unavailable (upstream_error)  attempts=3"
	if got := stepLine(ev); got != want {
		t.Errorf("stepLine:\n got %q\nwant %q", got, want)
	}
}
