package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner"
	"github.com/gohands/gohands/sandbox/sandboxtest"
)

// harness runs the real App on 127.0.0.1:0 against the offline world: the
// GitHub emulator, the sample repository behind git http-backend, and a
// scripted model.
type harness struct {
	t   testing.TB
	w   *world
	cfg Config
	log *logSink

	app  *App
	url  string // the webhook URL
	stop context.CancelFunc
	done chan error
}

// harnessOption adjusts the configuration before the App starts.
type harnessOption func(h *harness)

// withDocker runs jobs in the Docker sandbox with the busybox+bash test image.
func withDocker() harnessOption {
	return func(h *harness) {
		h.cfg.Sandbox.Driver = "docker"
		h.cfg.Sandbox.Image = sandboxtest.MustImage(h.t)
	}
}

// withScript replaces the recorded conversation with steps.
func withScript(steps ...apptest.LLMStep) harnessOption {
	return func(h *harness) {
		llm := apptest.NewLLM(h.t, steps...)
		llm.SetVarFromRequest("WORKDIR", workDirInPrompt)
		h.cfg.LLM.BaseURL = llm.URL()
		h.w.llm = llm
	}
}

// mustHarness starts the world and the App; both stop when the test ends.
func mustHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	return mustHarnessWith(t, apptest.GitHubOptions{}, opts...)
}

// mustHarnessWith is mustHarness with the GitHub emulator built from ghOpts.
func mustHarnessWith(t testing.TB, ghOpts apptest.GitHubOptions, opts ...harnessOption) *harness {
	t.Helper()
	dir := t.TempDir()
	w, err := startWorldWith(dir, ghOpts)
	if err != nil {
		t.Fatalf("start world: %v", err)
	}
	t.Cleanup(w.close)
	h := &harness{t: t, w: w, cfg: w.config(filepath.Join(dir, "data")), log: &logSink{}}
	h.cfg.Sandbox.Driver = "process"
	h.cfg.Runner.JobTimeout = 2 * time.Minute
	for _, o := range opts {
		o(h)
	}
	h.start()
	t.Cleanup(func() {
		h.shutdown()
		if t.Failed() {
			t.Logf("gohands log:\n%s", h.log.String())
		}
	})
	return h
}

// start starts a new App on the harness's store.
func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := New(ctx, h.cfg, Options{Logger: log})
	if err != nil {
		cancel()
		h.t.Fatalf("app.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	h.app, h.stop, h.done = a, cancel, make(chan error, 1)
	h.url = "http://" + ln.Addr().String()
	go func() { h.done <- a.Serve(ctx, ln) }()
	h.waitHealthy()
}

func (h *harness) waitHealthy() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(h.url + HealthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("%s never answered 200", HealthPath)
}

// shutdown stops the App as SIGTERM would and waits for it.
func (h *harness) shutdown() {
	if h.stop == nil {
		return
	}
	h.stop()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		h.t.Errorf("Serve did not return within a minute of shutdown")
	}
	h.stop = nil
}

// send posts a signed webhook and returns the status.
func (h *harness) send(event, delivery string, payload any) int {
	h.t.Helper()
	status, err := h.w.webhook(context.Background(), h.url+WebhookPath, event, delivery, payload)
	if err != nil {
		h.t.Fatal(err)
	}
	h.app.courtesy.Wait() // the 👀 and replies go out after the answer
	return status
}

// sendFile posts a payload from testdata/webhooks with fields replaced.
func (h *harness) sendRaw(event, delivery string, body []byte) int {
	h.t.Helper()
	req, err := h.w.gh.WebhookRequest(h.url+WebhookPath, event, delivery, body)
	if err != nil {
		h.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h.app.courtesy.Wait() // the 👀 and replies go out after the answer
	return resp.StatusCode
}

func (h *harness) key(n int) runner.Key {
	return runner.Key{Owner: sampleOwner, Repo: sampleRepo, Number: n}
}

// jobs returns the jobs of issue n.
func (h *harness) jobs(n int) []*runner.Job {
	h.t.Helper()
	jobs, err := h.app.Queue().Jobs(h.key(n))
	if err != nil {
		h.t.Fatal(err)
	}
	return jobs
}

// waitDone waits until every job of issue n is done and returns them.
func (h *harness) waitDone(n int) []*runner.Job {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		jobs := h.jobs(n)
		done := len(jobs) > 0
		for _, j := range jobs {
			done = done && j.State.Done()
		}
		if done {
			return jobs
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("jobs of #%d not done after 2 minutes: %+v", n, h.jobs(n))
	return nil
}

// waitFor polls cond until it holds or the time runs out.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// payload reads testdata/webhooks/NAME and applies edits to its JSON.
func payload(t testing.TB, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// logSink is a log sink safe for concurrent writes.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logSink) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logSink) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
