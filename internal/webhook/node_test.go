package webhook_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/webhook"
)

// NodeModulesEnv names the node_modules directory holding the npm
// standardwebhooks package (.ci/run installs standardwebhooks@1.1.1).
const NodeModulesEnv = "AGENTPLANE_TEST_STANDARDWEBHOOKS_NODE_MODULES"

// verifyJS verifies each captured request with the official npm library
// and prints one line per request.
const verifyJS = `
const { Webhook } = require("standardwebhooks");
const { secrets, requests } = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
for (const r of requests) {
  for (const s of secrets) {
    const got = new Webhook(s).verify(r.body, r.headers);
    if (got.type !== r.type) throw new Error("payload type " + got.type + ", want " + r.type);
  }
  console.log("verified " + r.headers["webhook-id"]);
}
`

func TestSignaturesVerifyWithTheNodeLibrary(t *testing.T) {
	modules := os.Getenv(NodeModulesEnv)
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		if os.Getenv("CI") == "1" {
			t.Fatalf("CI=1 needs node and %s (npm install --prefix DIR standardwebhooks@1.1.1; DIR/node_modules)", NodeModulesEnv)
		}
		t.Skipf("node or %s missing: npm install --prefix DIR standardwebhooks@1.1.1 and set %s=DIR/node_modules", NodeModulesEnv, NodeModulesEnv)
	}
	type captured struct {
		Type    string            `json:"type"`
		Body    string            `json:"body"`
		Headers map[string]string `json:"headers"`
	}
	var (
		mu   sync.Mutex
		reqs []captured
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &p)
		h := map[string]string{}
		for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			h[k] = r.Header.Get(k)
		}
		mu.Lock()
		reqs = append(reqs, captured{Type: p.Type, Body: string(body), Headers: h})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	w := newWorld(t, srv.URL)
	old := w.hook.Secret
	next := webhook.NewSecret()
	must(t, w.db.RotateSecret(t.Context(), "acme", w.hook.ID, next, time.Now().Add(webhook.RetryFor), nil))
	w.run(t)
	w.drain(t, w.deliverer("r"))

	in, err := json.Marshal(map[string]any{"secrets": []string{old, next}, "requests": reqs})
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "in.json"), in, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "verify.js"), []byte(verifyJS), 0o600))
	cmd := exec.Command(node, filepath.Join(dir, "verify.js"), filepath.Join(dir, "in.json"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "verified msg_"); n != 3 || len(reqs) != 3 {
		t.Fatalf("node verified %d of %d requests:\n%s", n, len(reqs), out)
	}
}
