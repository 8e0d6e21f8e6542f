package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/sandbox"
)

// mustSandbox starts a real process sandbox that is closed when the test ends.
func mustSandbox(tb testing.TB, env map[string]string) sandbox.Sandbox {
	tb.Helper()
	drv, err := sandbox.NewProcess(sandbox.ProcessOptions{Instance: "agenttest", BaseDir: tb.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatalf("process driver: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := drv.Start(ctx, sandbox.Spec{JobID: "test", Env: env})
	if err != nil {
		tb.Fatalf("start sandbox: %v", err)
	}
	tb.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// memLog is an EventLog in memory.
type memLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *memLog) Append(_ context.Context, e Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	return nil
}

func (l *memLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

func (l *memLog) kind(k string) []Event {
	var out []Event
	for _, e := range l.all() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// testConfig points the loop at the scripted server with fast retries.
func testConfig(llm *apptest.LLM) Config {
	return Config{BaseURL: llm.URL(), APIKey: "test-key", Model: "scripted", RetryBase: time.Millisecond, MaxRetries: 3, RequestTimeout: 10 * time.Second}
}

// mustRun runs the loop and fails the test on an unexpected error.
func mustRun(tb testing.TB, cfg Config, sb sandbox.Sandbox, task Task, hooks Hooks) (Result, *memLog) {
	tb.Helper()
	log := &memLog{}
	if task.System == "" {
		task.System = "You are a test agent."
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg, sb, task, log, hooks)
	if err != nil {
		tb.Fatalf("Run: %v (result %+v)", err, res)
	}
	return res, log
}

// toolResults returns the tool messages of a request, in order.
func toolResults(r apptest.LLMRequest) []string {
	var out []string
	for _, m := range r.Messages() {
		if m["role"] == "tool" {
			s, _ := m["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

// lastToolResult is the last tool message of the last request.
func lastToolResult(tb testing.TB, llm *apptest.LLM) string {
	tb.Helper()
	reqs := llm.Requests()
	res := toolResults(reqs[len(reqs)-1])
	if len(res) == 0 {
		tb.Fatal("the last request has no tool result")
	}
	return res[len(res)-1]
}

func finishStep(msg string) apptest.LLMStep {
	return apptest.LLMTool("finish", map[string]string{"message": msg})
}

func jsonArgs(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
