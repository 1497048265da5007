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
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
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
