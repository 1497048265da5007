// Command openapi benchmarks the OpenAPI importer against GitHub's REST
// description (npm @octokit/openapi, installed into a cache directory on
// first use) and a synthetic document of the same size. For each it measures
// a bare json.Unmarshal into any, the full Import, and optionally
// kin-openapi's default loader, and prints wall time, CPU time, peak heap
// growth and allocation, with ratios to json.Unmarshal.
//
//	go run ./bench/openapi [-runs 5] [-kin] [-spec file.json]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/openapi"
	"github.com/agentplane/agentplane/internal/tool/openapi/octokit"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/openapi:", err)
		os.Exit(1)
	}
}

// document is one input of the benchmark.
type document struct {
	name string
	data []byte
	// operations is the expected operation count, 0 when unknown.
	operations int
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench/openapi", flag.ContinueOnError)
	runs := fs.Int("runs", 5, "runs per case; the best wall time and the highest peak are reported")
	kin := fs.Bool("kin", false, "also measure kin-openapi's default loader (LoadFromData), one run")
	specFile := fs.String("spec", "", "a description to use instead of GitHub's")
	synthOut := fs.String("write-synthetic", "", "also write the synthetic document to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var docs []document
	if *specFile != "" {
		data, err := os.ReadFile(*specFile)
		if err != nil {
			return err
		}
		docs = append(docs, document{name: filepath.Base(*specFile), data: data})
	} else {
		dir, err := octokit.Dir(ctx)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(filepath.Join(dir, "api.github.com.json"))
		if err != nil {
			return err
		}
		docs = append(docs, document{name: "GitHub api.github.com.json (@octokit/openapi@" + octokit.Version + ")", data: data, operations: octokit.Operations["api.github.com.json"]})
	}
	synth, ops := synthetic(len(docs[0].data))
	docs = append(docs, document{name: "synthetic, same size", data: synth, operations: ops})
	if *synthOut != "" {
		if err := os.WriteFile(*synthOut, synth, 0o644); err != nil {
			return err
		}
	}

	fmt.Fprintf(stdout, "%s %s/%s, GOMAXPROCS=%d\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "document\tsize MB\tcase\twall ms\tCPU ms\tpeak heap MB\talloc MB\twall ×\tpeak ×\toperations\t")
	for _, doc := range docs {
		base, err := measure(*runs, func() (int, error) {
			var v any
			return 0, json.Unmarshal(doc.data, &v)
		})
		if err != nil {
			return fmt.Errorf("%s: unmarshal: %w", doc.name, err)
		}
		cases := []struct {
			name string
			runs int
			f    func() (int, error)
		}{
			{"json.Unmarshal any", 0, nil},
			{"openapi.Import", *runs, func() (int, error) {
				spec, err := openapi.New().Import(ctx, tool.Source{Data: doc.data})
				if err != nil {
					return 0, err
				}
				return len(spec.Operations), nil
			}},
		}
		if *kin {
			cases = append(cases, struct {
				name string
				runs int
				f    func() (int, error)
			}{"kin LoadFromData", 1, func() (int, error) {
				t, err := openapi3.NewLoader().LoadFromData(doc.data)
				if err != nil {
					return 0, err
				}
				n := 0
				for _, item := range t.Paths.Map() {
					n += len(item.Operations())
				}
				return n, nil
			}})
		}
		for _, c := range cases {
			m := base
			if c.f != nil {
				if m, err = measure(c.runs, c.f); err != nil {
					return fmt.Errorf("%s: %s: %w", doc.name, c.name, err)
				}
				if doc.operations != 0 && m.operations != doc.operations {
					return fmt.Errorf("%s: %s found %d operations, want %d", doc.name, c.name, m.operations, doc.operations)
				}
			}
			ops := "-"
			if c.f != nil {
				ops = fmt.Sprint(m.operations)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%d\t%d\t%.0f\t%.0f\t%.1f\t%.1f\t%s\t\n", doc.name, mb(len(doc.data)), c.name,
				m.wall.Milliseconds(), m.cpu.Milliseconds(), mb(int(m.peak)), mb(int(m.alloc)),
				float64(m.wall)/float64(base.wall), float64(m.peak)/float64(base.peak), ops)
		}
	}
	return tw.Flush()
}

func mb(n int) float64 { return float64(n) / (1 << 20) }

// measurement is the best wall and CPU time of the runs and the highest
// peak heap growth and allocation.
type measurement struct {
	wall, cpu   time.Duration
	peak, alloc uint64
	operations  int
}

func measure(runs int, f func() (int, error)) (measurement, error) {
	var best measurement
	for i := range runs {
		m, err := measureOnce(f)
		if err != nil {
			return best, err
		}
		if i == 0 || m.wall < best.wall {
			best.wall, best.cpu = m.wall, m.cpu
		}
		best.peak, best.alloc, best.operations = max(best.peak, m.peak), max(best.alloc, m.alloc), m.operations
	}
	return best, nil
}

// measureOnce runs f once after a GC, sampling the live heap every
// millisecond: peak is the highest heap in use above the level before.
func measureOnce(f func() (int, error)) (measurement, error) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	baseHeap, baseAlloc := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	peak := baseHeap
	done := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		high := uint64(0)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				sampled <- high
				return
			case <-tick.C:
				metrics.Read(s)
				high = max(high, s[0].Value.Uint64())
			}
		}
	}()
	cpu0 := cpuTime()
	start := time.Now()
	n, err := f()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	metrics.Read(samples)
	close(done)
	peak = max(peak, <-sampled, samples[0].Value.Uint64())
	return measurement{wall: wall, cpu: cpu, peak: peak - baseHeap, alloc: samples[1].Value.Uint64() - baseAlloc, operations: n}, err
}

// cpuTime is the process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
