package telemetry_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/telemetry"
)

func TestMetricsShowRunningAndQueuedExecutions(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	running, queued := 3, 7
	telemetry.RegisterExecutions(reg, func() (int, int) { return running, queued })
	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)

	for _, want := range []string{"agentplane_workflow_executions_running 3", "agentplane_workflow_executions_queued 7"} {
		if exposition := get(t, "GET", srv.URL, nil); !strings.Contains(exposition, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	running, queued = 1, 0
	if exposition := get(t, "GET", srv.URL, nil); !strings.Contains(exposition, "\nagentplane_workflow_executions_queued 0\n") {
		t.Error("/metrics does not read the queue at each scrape")
	}
}
