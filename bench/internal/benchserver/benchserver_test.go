package benchserver

import (
	"strings"
	"testing"
)

func TestChildEnvDropsAgentplaneSettings(t *testing.T) {
	t.Setenv("AGENTPLANE_DATABASE_URL", "postgres://elsewhere")
	t.Setenv("AGENTPLANE_DEBUG_ADDR", "127.0.0.1:6061")
	env := strings.Join(childEnv(), "\n")
	if strings.Contains(env, "AGENTPLANE_DATABASE_URL") {
		t.Error("the server would inherit AGENTPLANE_DATABASE_URL")
	}
	if !strings.Contains(env, "AGENTPLANE_DEBUG_ADDR=127.0.0.1:6061") {
		t.Error("AGENTPLANE_DEBUG_ADDR is not passed on")
	}
}
