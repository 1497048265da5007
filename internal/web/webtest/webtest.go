// Package webtest runs browser tests of the viewer's pages in Debian's
// headless Chromium through chromedp. Tests skip when Chromium is absent,
// except in CI (env CI set), where they fail: CI installs it.
package webtest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// Browser starts a headless Chromium for the test and returns a chromedp
// context whose browser is running; the browser is closed when the test
// ends. Give each page its own tab with chromedp.NewContext(ctx). Browser
// skips the test when Chromium is absent, unless env CI is set.
func Browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("browser test in CI: %s not found (%v); .ci/run installs the chromium package", ChromiumPath, err)
		}
		t.Skipf("browser test skipped: %s not found; install it with apt-get install chromium", ChromiumPath)
	}

	// chromedp reports from its own goroutines; stop before the test ends.
	var mu sync.Mutex
	done := false
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf("chromedp: "+format, args...)
		}
	}

	// No user-data-dir flag: the allocator makes a temporary profile and
	// removes it when the browser is gone.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(ChromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf))
	t.Cleanup(func() {
		closeCtx, cancelClose := context.WithTimeout(ctx, 10*time.Second)
		defer cancelClose()
		if err := chromedp.Cancel(closeCtx); err != nil {
			logf("closing the browser: %v", err)
		}
		mu.Lock()
		done = true
		mu.Unlock()
		cancel()
		cancelAlloc()
	})

	startCtx, cancelStart := context.WithTimeout(context.Background(), time.Minute)
	defer cancelStart()
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }() // the first Do starts the browser, bound to ctx
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start %s: %v", ChromiumPath, err)
		}
	case <-startCtx.Done():
		t.Fatalf("start %s: no answer within a minute", ChromiumPath)
	}
	return ctx
}

// WriteArtifact writes a test output file, such as a screenshot, to the
// test's artifact directory (kept with go test -artifacts -outputdir DIR)
// and returns its path.
func WriteArtifact(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("write artifact: %v", err)
	}
	t.Logf("artifact: %s", path)
	return path
}
