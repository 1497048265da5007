package tool

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentplane/agentplane/internal/problem"
)

func TestValidateLimits(t *testing.T) {
	reg := &Registration{Name: "pay", Type: OpenAPI, Spec: "x",
		Limits: &Limits{Rate: "fast", Concurrency: -1, Timeout: "soon",
			Retries: &RetryLimits{Max: 11, On: []int{200}},
			Circuit: &CircuitLimits{Failures: 0, Window: "-1s"}},
		OperationLimits: map[string]Limits{"charge": {Rate: "0/s"}},
	}
	err := (&Service{}).Validate("acme", reg)
	var pe *problem.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Validate = %v, want a validation problem", err)
	}
	var fields []string
	for _, fe := range pe.Errors {
		fields = append(fields, fe.Field)
	}
	want := []string{"limits.rate", "limits.concurrency", "limits.timeout", "limits.retries.max", "limits.retries.on[0]",
		"limits.circuit.failures", "limits.circuit.window", "operation_limits.charge.rate"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields refused (-want +got):\n%s", diff)
	}
	ok := &Registration{Name: "pay", Type: OpenAPI, Spec: "x", Limits: &Limits{Rate: "50/s", Concurrency: 8, Timeout: "10s",
		Retries: &RetryLimits{Max: 3, On: []int{429, 503}}, Circuit: &CircuitLimits{Failures: 5, Window: "30s", OpenFor: "30s"}}}
	if err := (&Service{}).Validate("acme", ok); err != nil {
		t.Errorf("valid limits refused: %v", err)
	}
}

func TestEffectiveLimits(t *testing.T) {
	tl := &Tool{ID: "t1", Limits: &Limits{Rate: "20/s", Concurrency: 3, Circuit: &CircuitLimits{Failures: 2}},
		OperationLimits: map[string]Limits{"charge": {Concurrency: 1, Timeout: "2s"}}}
	got := tl.EffectiveLimits("charge")
	want := &Effective{RateKey: "t1", ConcurrencyKey: "t1/charge", CircuitKey: "t1", Rate: 20, Per: time.Second,
		Concurrency: 1, Timeout: 2 * time.Second, Failures: 2, Window: DefaultCircuitWindow, OpenFor: DefaultOpenFor}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EffectiveLimits (-want +got):\n%s", diff)
	}
	if e := (&Tool{ID: "t2"}).EffectiveLimits("x"); e != nil {
		t.Errorf("a tool without limits has %+v", e)
	}
}
