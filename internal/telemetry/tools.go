package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// toolMetrics are the per-tool metrics of SPEC §4 "Protecting the backing
// APIs"; the tool label is the tool's id, bounded by registrations.
type toolMetrics struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	slotWait *prometheus.HistogramVec
	circuit  *prometheus.GaugeVec
}

// toolBuckets are the bounds of a tool call's or its wait's duration.
var toolBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newToolMetrics(reg prometheus.Registerer) toolMetrics {
	return toolMetrics{
		calls: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_tool_calls_total",
			Help: "Tool calls made by workflows and replays, by tool id.",
		}, []string{"tool"})),
		errors: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_tool_errors_total",
			Help: "Failed tool calls, by tool id and error_code (timeout, rate_limited, upstream_error, circuit_open, transport, invalid_arguments, internal).",
		}, []string{"tool", "code"})),
		latency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentplane_tool_call_duration_seconds",
			Help:    "Time of a tool call, its waits and retries included, by tool id.",
			Buckets: toolBuckets,
		}, []string{"tool"})),
		retries: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_tool_retries_total",
			Help: "Attempts of tool calls after their first, by tool id.",
		}, []string{"tool"})),
		slotWait: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentplane_tool_slot_wait_seconds",
			Help:    "Time an attempt of a call of a tool with a rate or concurrency limit waited for its turn and slot, by tool id.",
			Buckets: toolBuckets,
		}, []string{"tool"})),
		circuit: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentplane_tool_circuit_state",
			Help: "State of this replica's circuit of a tool (or tool/operation): 0 closed, 1 half-open, 2 open.",
		}, []string{"circuit"})),
	}
}

// ObserveToolCall records one finished tool call; code is its error_code,
// "" for a success. A nil Metrics records nothing.
func (m *Metrics) ObserveToolCall(toolID, code string, attempts int, d time.Duration) {
	if m == nil {
		return
	}
	m.tools.calls.WithLabelValues(toolID).Inc()
	m.tools.latency.WithLabelValues(toolID).Observe(d.Seconds())
	if attempts > 1 {
		m.tools.retries.WithLabelValues(toolID).Add(float64(attempts - 1))
	}
	if code != "" {
		m.tools.errors.WithLabelValues(toolID, code).Inc()
	}
}

// ObserveToolSlotWait records how long an attempt waited for its tool's
// rate turn and concurrency slot.
func (m *Metrics) ObserveToolSlotWait(toolID string, d time.Duration) {
	if m == nil {
		return
	}
	m.tools.slotWait.WithLabelValues(toolID).Observe(d.Seconds())
}

// SetToolCircuit records a circuit's state: 0 closed, 1 half-open, 2 open.
func (m *Metrics) SetToolCircuit(circuit string, state int) {
	if m == nil {
		return
	}
	m.tools.circuit.WithLabelValues(circuit).Set(float64(state))
}
