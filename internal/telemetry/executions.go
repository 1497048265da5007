package telemetry

import "github.com/prometheus/client_golang/prometheus"

// RegisterExecutions registers the gauges of the workflow executions
// running on this server and of those queued behind its cap, read from
// counts at each scrape.
func RegisterExecutions(reg prometheus.Registerer, counts func() (running, queued int)) {
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentplane_workflow_executions_running",
		Help: "Workflow executions running on this server.",
	}, func() float64 {
		running, _ := counts()
		return float64(running)
	}))
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentplane_workflow_executions_queued",
		Help: "Workflow executions waiting for a slot under --max-running on this server.",
	}, func() float64 {
		_, queued := counts()
		return float64(queued)
	}))
}
