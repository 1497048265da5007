package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestSmallStacksEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string // nil: nothing to do
	}{
		{"a client command", []string{"agents", "list"}, []string{"HOME=/root"}, nil},
		{"no command", nil, []string{"HOME=/root"}, nil},
		{"serve without GODEBUG", []string{"serve", "--demo"}, []string{"HOME=/root"},
			[]string{"HOME=/root", "GODEBUG=adaptivestackstart=0"}},
		{"serve with an empty GODEBUG", []string{"serve"}, []string{"GODEBUG=", "HOME=/root"},
			[]string{"GODEBUG=adaptivestackstart=0", "HOME=/root"}},
		{"serve with other settings", []string{"serve"}, []string{"GODEBUG=http2debug=1,gctrace=1"},
			[]string{"GODEBUG=http2debug=1,gctrace=1,adaptivestackstart=0"}},
		{"serve with the setting chosen", []string{"serve"}, []string{"GODEBUG=gctrace=1,adaptivestackstart=1"}, nil},
		{"serve with the setting already made", []string{"serve"}, []string{"GODEBUG=adaptivestackstart=0"}, nil},
		{"the first GODEBUG is the one read", []string{"serve"}, []string{"GODEBUG=gctrace=1", "GODEBUG=adaptivestackstart=1"},
			[]string{"GODEBUG=gctrace=1,adaptivestackstart=0", "GODEBUG=adaptivestackstart=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.env)
			got, ok := smallStacksEnv(tc.args, tc.env)
			if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
				t.Errorf("smallStacksEnv(%q, %q) = %q, %v; want %q", tc.args, tc.env, got, ok, tc.want)
			}
			if !slices.Equal(tc.env, before) {
				t.Errorf("the environment given was changed: %q", tc.env)
			}
		})
	}
}

// TestServeRunsWithSmallStacks starts real server processes and reads the
// environment each runs with, as the kernel has it after the program
// executed itself again.
func TestServeRunsWithSmallStacks(t *testing.T) {
	for _, tc := range []struct {
		godebug string // "" leaves GODEBUG unset
		want    string
	}{
		{"", "adaptivestackstart=0"},
		{"gctrace=0", "gctrace=0,adaptivestackstart=0"},
		{"adaptivestackstart=1", "adaptivestackstart=1"},
	} {
		t.Run(fmt.Sprintf("GODEBUG=%s", tc.godebug), func(t *testing.T) {
			if tc.godebug == "" {
				if v, ok := os.LookupEnv("GODEBUG"); ok {
					t.Setenv("GODEBUG", v) // restored after the test
					os.Unsetenv("GODEBUG")
				}
			} else {
				t.Setenv("GODEBUG", tc.godebug)
			}
			srv := startChild(t, freeAddr(t), "--data", t.TempDir())
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", srv.cmd.Process.Pid))
			if err != nil {
				t.Skipf("this system has no /proc to read a process's environment from: %v", err)
			}
			var godebug []string
			for _, kv := range bytes.Split(environ, []byte{0}) {
				if v, ok := strings.CutPrefix(string(kv), "GODEBUG="); ok {
					godebug = append(godebug, v)
				}
			}
			if len(godebug) == 0 || godebug[0] != tc.want {
				t.Errorf("the server runs with GODEBUG %q, want %q first", godebug, tc.want)
			}
		})
	}
}
