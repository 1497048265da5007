// Command go-agent is the Go recipe of an external agent (docs/external-agents.md):
// it listens on 127.0.0.1:$PORT (default 9100) and answers agentplane's
// invocations with goagent, asking the model $MODEL (default "default").
package main

import (
	"cmp"
	"log"
	"net/http"
	"os"

	"github.com/agentplane/agentplane/examples/external/go-agent/goagent"
)

func main() {
	addr := "127.0.0.1:" + cmp.Or(os.Getenv("PORT"), "9100")
	log.Printf("listening on http://%s", addr)
	log.Fatal(http.ListenAndServe(addr, goagent.Handler(cmp.Or(os.Getenv("MODEL"), "default"), 8)))
}
