package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestRetentionFlagsRefuseBadValues: a retention shorter than an hour, or
// that is not one, stops serve at start naming the flag and what to write.
func TestRetentionFlagsRefuseBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retention", "30m"}, "--retention: \"30m\" is shorter than the minimum of one hour"},
		{[]string{"--retention", "ninety days"}, "--retention: \"ninety days\" is not a number of days (90d)"},
		{[]string{"--retention", "-5d"}, "--retention: \"-5d\" is not a number of days"},
		{[]string{"--audit-retention", "59m"}, "--audit-retention: \"59m\" is shorter"},
		{[]string{"--tenant-retention", "acme"}, "--tenant-retention: \"acme\" is not tenant=retention (acme=30d)"},
		{[]string{"--tenant-retention", "acme=2s"}, "--tenant-retention: tenant \"acme\": \"2s\" is shorter"},
		{[]string{"--tenant-retention", "acme=30d", "--tenant-retention", "acme=0"}, "tenant \"acme\" is given twice"},
		{[]string{"--retention-interval", "10ms"}, "--retention-interval must be at least 1s"},
	} {
		args := append([]string{"serve", "--data", t.TempDir()}, tc.args...)
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	f := retentionFlags{workflows: "90d", tenants: []string{"acme=30d", "globex=0"}, audit: "8760h", every: time.Minute}
	p, err := f.policy()
	if err != nil || p.Default.Hours() != 90*24 || p.Tenants["acme"].Hours() != 30*24 || p.Tenants["globex"] != 0 || p.Audit.Hours() != 8760 {
		t.Errorf("policy of %+v: %+v, %v", f, p, err)
	}
}
