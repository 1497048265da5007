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

func TestRaiseFileLimit(t *testing.T) {
	have, err := RaiseFileLimit(16)
	if err != nil || have < 16 {
		t.Fatalf("RaiseFileLimit(16) = %d, %v; want at least 16 and no error", have, err)
	}
	// More than any kernel allows (fs.nr_open is at most 2^30): refused
	// with the limit in effect and words on how to get more.
	have, err = RaiseFileLimit(1 << 40)
	if err == nil || !strings.Contains(err.Error(), "ulimit -Hn") || have == 0 || have >= 1<<40 {
		t.Fatalf("RaiseFileLimit(1<<40) = %d, %v; want the hard limit and an error naming ulimit -Hn", have, err)
	}
}
