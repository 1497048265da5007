package tool

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// TestCallAuditDetailsAreCanonical: a call's record carries its details in
// their canonical form, which its hash takes as it is.
func TestCallAuditDetailsAreCanonical(t *testing.T) {
	req := CallRequest{Tenant: "acme", Tool: &Tool{ID: "tool_pets", Type: OpenAPI},
		Operation: &Operation{ID: "getPet", Kind: Read}, WorkflowID: "wf_1"}
	res := CallResult{Status: 200, Request: RecordedRequest{Method: "GET", URL: "https://pets.example/pets/1?key=s3cret"},
		Duration: 12 * time.Millisecond, Attempts: 2}
	rec := CallAuditRecord(context.Background(), req, res, nil, time.Now())
	canon, err := jcs.Transform(rec.Details)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(canon, rec.Details) {
		t.Errorf("details %s are not canonical; canonical: %s", rec.Details, canon)
	}
	if bytes.Contains(rec.Details, []byte("s3cret")) {
		t.Errorf("details %s carry the query", rec.Details)
	}
}
