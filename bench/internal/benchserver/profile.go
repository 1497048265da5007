package benchserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// CPUProfile writes the CPU profile of the next d (whole seconds, at least
// one) of the server whose --debug-addr is addr to file.
func CPUProfile(ctx context.Context, addr string, d time.Duration, file string) error {
	secs := max(1, int((d+time.Second-1)/time.Second))
	return saveProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), file)
}

// HeapProfile writes the heap profile of the server whose --debug-addr is
// addr to file, with a collection first (gc=1), so its in-use figures are
// what is live at that moment, and the runtime's memory statistics of the
// same moment (stacks, heap, what the process holds) to file + ".txt", and
// its goroutines, grouped by stack, to file + ".goroutines".
func HeapProfile(ctx context.Context, addr, file string) error {
	if err := saveProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr), file); err != nil {
		return err
	}
	if err := saveProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/heap?debug=1", addr), file+".txt"); err != nil {
		return err
	}
	return saveProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", addr), file+".goroutines")
}

func saveProfile(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PeakGoroutines samples the goroutines of srv every interval until ctx
// ends or stop is called; stop returns the most seen.
func PeakGoroutines(ctx context.Context, srv *Server, every time.Duration) (stop func() int) {
	sampling, cancel := context.WithCancel(ctx)
	peak := make(chan int, 1)
	go func() {
		most := 0
		for sampling.Err() == nil {
			if g, err := srv.Goroutines(sampling); err == nil {
				most = max(most, g)
			}
			select {
			case <-sampling.Done():
			case <-time.After(every):
			}
		}
		peak <- most
	}()
	return func() int {
		cancel()
		return <-peak
	}
}
