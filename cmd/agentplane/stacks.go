package main

import (
	"os"
	"slices"
	"strings"
	"syscall"
)

// smallStacks is the runtime setting `agentplane serve` starts with: every
// goroutine begins at the runtime's smallest stack and grows as it needs,
// instead of at the average stack size the last collection measured.
//
// A server holding thousands of waiting workflows holds several goroutines
// for each (its invocation's connection and that connection's reader, its
// execution, its model request's reader and writer), most of them shallow.
// The executions and the middleware run deep code (SQLite, JSON, the HTTP
// stack), which raises the average every new goroutine then starts with. The
// runtime reads the setting only from GODEBUG when the process starts (not
// from a //go:debug line, and not when the variable changes later), so serve
// runs the program again with it; see startWithSmallStacks.
const smallStacks = "adaptivestackstart=0"

// startWithSmallStacks executes this program again, in place of this
// process (the same PID, arguments and environment), with smallStacks added
// to GODEBUG, when args run the server and GODEBUG does not set
// adaptivestackstart itself (GODEBUG=adaptivestackstart=1 keeps the
// runtime's default). It returns only when nothing is to be done or the
// program cannot be executed again; the server then runs with the runtime's
// default stacks.
func startWithSmallStacks(args []string) {
	env, ok := smallStacksEnv(args, os.Environ())
	if !ok {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env)
}

// smallStacksEnv returns env with smallStacks added to its GODEBUG, and
// true, when args run the server and GODEBUG (its first entry, the one the
// runtime reads) does not name adaptivestackstart.
func smallStacksEnv(args, env []string) ([]string, bool) {
	if len(args) == 0 || args[0] != "serve" {
		return nil, false
	}
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		for _, setting := range strings.Split(v, ",") {
			if name, _, _ := strings.Cut(setting, "="); name == "adaptivestackstart" {
				return nil, false
			}
		}
		out := slices.Clone(env)
		if v == "" {
			out[i] = "GODEBUG=" + smallStacks
		} else {
			out[i] = kv + "," + smallStacks
		}
		return out, true
	}
	return append(slices.Clone(env), "GODEBUG="+smallStacks), true
}
