// Command importmem measures what registering large API descriptions costs
// in memory. First, through the real server binary (built from
// ./cmd/agentplane and started as its own process on SQLite): the server's
// resident memory before any registration, after each document is
// registered, and once everything is registered and the server is idle.
// Then the peak heap of each document's import against the peak heap of
// json.Unmarshal of the same bytes into an any (for the WSDL, of encoding/xml
// tokenizing it), sampled every millisecond. Each document is measured in a
// process of its own that holds nothing else: the garbage collector lets
// the heap grow in proportion to what is live, so the documents a process
// holds would inflate an allocation-heavy import's peak more than a parse's.
//
//	go run ./bench/importmem [-settle 5s] [-runs 5]
//
// The documents are real ones (internal/realdocs), fetched from npm and the
// Go module proxy on first use and served to the server from a loopback
// HTTP server.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/agentplane/agentplane/bench/internal/benchserver"
	"github.com/agentplane/agentplane/internal/realdocs"
	"github.com/agentplane/agentplane/internal/tool"
	"github.com/agentplane/agentplane/internal/tool/relevance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	settle := flag.Duration("settle", 5*time.Second, "how long the server idles before the last reading")
	measure := flag.String("measure", "", "measure one document's peak heaps and print them as JSON (run by the benchmark itself)")
	runs := flag.Int("runs", 5, "processes measuring each document's peak heaps")
	flag.Parse()
	run := func() error { return run(ctx, *settle, max(*runs, 1)) }
	if *measure != "" {
		run = func() error { return measureOne(ctx, *measure) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/importmem:", err)
		os.Exit(1)
	}
}

type doc struct {
	realdocs.Doc
	data []byte
}

func run(ctx context.Context, settle time.Duration, runs int) error {
	var docs []doc
	for _, d := range realdocs.All {
		fmt.Fprintf(os.Stderr, "reading %s (%s) …\n", d.Name, d.Source)
		data, err := d.Read(ctx)
		if err != nil {
			return err
		}
		docs = append(docs, doc{d, data})
	}
	if err := serverRSS(ctx, docs, settle); err != nil {
		return err
	}
	return importHeap(ctx, docs, runs)
}

// serverRSS registers every document with a fresh server and prints its
// resident memory along the way.
func serverRSS(ctx context.Context, docs []doc, settle time.Duration) error {
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, d := range docs {
			if r.URL.Path == "/"+d.Name {
				_, _ = w.Write(d.data)
				return
			}
		}
		http.NotFound(w, r)
	}))
	defer files.Close()
	tmp, err := os.MkdirTemp("", "agentplane-importmem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintln(os.Stderr, "building ./cmd/agentplane …")
	bin, err := benchserver.Build(ctx, ".", tmp)
	if err != nil {
		return err
	}
	srv, err := benchserver.Start(ctx, benchserver.Config{Binary: bin, Data: tmp + "/data"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := srv.MintToken(ctx, "tools:write tools:read"); err != nil {
		return err
	}
	time.Sleep(time.Second)
	start := srv.RSS()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server RSS\tMiB\tvs start\tregistration\t")
	fmt.Fprintf(tw, "at start\t%.1f\t\t\t\n", mib(start))
	for _, d := range docs {
		began := time.Now()
		body, _ := json.Marshal(map[string]any{"name": d.Name, "type": d.Kind, "spec_url": files.URL + "/" + d.Name, "endpoint_url": "https://example.com/"})
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.BaseURL()+"/v1/tools", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("register %s: %d %s", d.Name, resp.StatusCode, out)
		}
		took := time.Since(began)
		rss := srv.RSS()
		fmt.Fprintf(tw, "after %s (%.1f MiB)\t%.1f\t%+.1f\t%s\t\n", d.Name, mib(int64(len(d.data))), mib(rss), mib(rss-start), took.Round(time.Millisecond))
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settle):
	}
	rss := srv.RSS()
	fmt.Fprintf(tw, "all registered, %s idle\t%.1f\t%+.1f\t\t\n", settle, mib(rss), mib(rss-start))
	return errors.Join(tw.Flush(), srv.Exited())
}

// importHeap prints each document's import peak heap against decoding it,
// each measured by a process of its own, runs times: the peaks vary by a
// quarter from run to run with the collector's timing, so the table gives
// the median and the highest.
func importHeap(ctx context.Context, docs []doc, runs int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(os.Stdout)
	fmt.Fprintf(tw, "document\tMiB\toperations\tparse peak MiB\timport peak MiB\tratio (median of %d)\thighest ratio\tkept MiB\t\n", runs)
	for _, d := range docs {
		var ms []measurement
		for range runs {
			cmd := exec.CommandContext(ctx, self, "-measure", d.Name)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
			var m measurement
			if err := json.Unmarshal(out, &m); err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
			ms = append(ms, m)
		}
		ratio := func(m measurement) float64 { return float64(m.Import.Peak) / float64(max(m.Parse.Peak, 1)) }
		slices.SortFunc(ms, func(a, b measurement) int { return cmp.Compare(ratio(a), ratio(b)) })
		m := ms[len(ms)/2]
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%.1f\t%.1f\t%.1f×\t%.1f×\t%.1f\t\n", d.Name, mib(int64(len(d.data))), m.Operations,
			mib(m.Parse.Peak), mib(m.Import.Peak), ratio(m), ratio(ms[len(ms)-1]), mib(m.Import.Kept))
	}
	return tw.Flush()
}

// measurement is what measureOne prints.
type measurement struct {
	Operations    int
	Parse, Import heapUse
}

// measureOne measures the named document's parse and import.
func measureOne(ctx context.Context, name string) error {
	i := slices.IndexFunc(realdocs.All, func(d realdocs.Doc) bool { return d.Name == name })
	if i < 0 {
		return fmt.Errorf("no document %q", name)
	}
	d := realdocs.All[i]
	data, err := d.Read(ctx)
	if err != nil {
		return err
	}
	var m measurement
	m.Parse = peakHeap(func() any {
		switch d.Kind {
		case "soap":
			return tokens(data)
		case "graphql":
			doc, _ := parser.ParseSchema(&ast.Source{Input: string(data)})
			return doc
		}
		var v any
		_ = json.Unmarshal(data, &v)
		return v
	})
	m.Import = peakHeap(func() any {
		var spec *tool.Spec
		var im tool.Importer
		if im, err = relevance.Importer(d.Kind); err == nil {
			spec, err = im.Import(ctx, tool.Source{Data: data})
		}
		if spec != nil {
			m.Operations = len(spec.Operations)
			return spec
		}
		return nil
	})
	runtime.KeepAlive(data) // kept is the spec's, not less the document's
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// tokens reads every token of an XML document, the least a WSDL reader does.
func tokens(data []byte) any {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var toks []xml.Token
	for {
		t, err := dec.Token()
		if err != nil {
			return toks
		}
		toks = append(toks, xml.CopyToken(t))
	}
}

type heapUse struct{ Peak, Kept int64 }

// peakHeap runs f and samples the heap every millisecond, returning the
// peak above the heap before f and what f's result keeps after a GC.
func peakHeap(f func() any) heapUse {
	base := heapAlloc()
	var peak atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), liveHeap()-base))
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	v := f()
	close(done)
	<-sampled
	peak.Store(max(peak.Load(), liveHeap()-base))
	kept := heapAlloc() - base
	runtime.KeepAlive(v)
	return heapUse{Peak: peak.Load(), Kept: kept}
}

// heapAlloc is the heap after a complete collection: two cycles, so that
// what the first finds dead is swept whatever the pacer was doing.
func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	return liveHeap()
}

// liveHeap is the heap now, garbage not yet collected included.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
