// Package redact_test measures what masking costs a tool call's step: the
// answer of a customer API (about 2 KB, 20 customers with an e-mail
// address, a card, an IBAN and a phone number each) masked with no
// redaction, with every detector, and with field pointers and every
// detector.
//
//	go test -run '^$' -bench . -benchmem ./bench/redact/
package redact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentplane/agentplane/internal/redact"
)

type oneKey []byte

func (k oneKey) RedactionKey(context.Context, string, []byte) ([]byte, error) { return k, nil }

func answer() json.RawMessage {
	var items []map[string]any
	for i := range 20 {
		items = append(items, map[string]any{"id": fmt.Sprintf("cus_%04d", i), "name": "Customer", "email": fmt.Sprintf("c%d@example.com", i),
			"card": "4111 1111 1111 1111", "iban": "DE89 3704 0044 0532 0130 00", "phone": "+44 20 7946 0958", "tax_id": fmt.Sprintf("TX-%08d", i)})
	}
	b, _ := json.Marshal(map[string]any{"customers": items})
	return b
}

func BenchmarkMaskAnswer(b *testing.B) {
	raw := answer()
	cases := []struct {
		name   string
		fields []string
		detect []string
	}{
		{"none", nil, nil},
		{"detectors", nil, redact.Detectors},
		{"fields+detectors", []string{"/response/body/customers/*/tax_id"}, redact.Detectors},
	}
	for _, tc := range cases {
		b.Run(fmt.Sprintf("%s/%dB", tc.name, len(raw)), func(b *testing.B) {
			s := &redact.Service{Keys: oneKey("bench key")}
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				m, err := s.Masker(context.Background(), "acme")
				if err != nil {
					b.Fatal(err)
				}
				m.JSON(raw, redact.RootResponse, tc.fields, tc.detect)
			}
		})
	}
}
