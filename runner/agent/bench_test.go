package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"testing"

	"github.com/gohands/gohands/sandbox"
)

// memSandbox is an in-process sandbox whose commands do nothing, so that a
// benchmark measures the loop and not the shell.
type memSandbox struct{ files map[string][]byte }

func (m *memSandbox) Exec(context.Context, sandbox.Command) (sandbox.Result, error) {
	return sandbox.Result{Output: "ok", Cwd: "/workspace"}, nil
}
func (m *memSandbox) ReadFile(_ context.Context, p string) ([]byte, error) {
	b, ok := m.files[p]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return b, nil
}
func (m *memSandbox) WriteFile(_ context.Context, p string, data []byte, _ fs.FileMode) error {
	m.files[p] = append([]byte(nil), data...)
	return nil
}
func (m *memSandbox) CopyIn(context.Context, string) error  { return nil }
func (m *memSandbox) CopyOut(context.Context, string) error { return nil }
func (m *memSandbox) WorkDir() string                       { return "/workspace" }
func (m *memSandbox) Isolated() bool                        { return true }
func (m *memSandbox) Close(context.Context) error           { return nil }

// cannedModel answers in process, without a network: n terminal and editor
// calls, then finish.
type cannedModel struct {
	n, calls int
}

func (c *cannedModel) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	c.calls++
	call := `{"name":"terminal","arguments":"{\"command\":\"go test ./...\"}"}`
	if c.calls%2 == 0 {
		call = `{"name":"file_editor","arguments":"{\"command\":\"str_replace\",\"path\":\"/workspace/a.go\",\"old_str\":\"x\",\"new_str\":\"y\"}"}`
	}
	if c.calls > c.n {
		call = `{"name":"finish","arguments":"{\"message\":\"done\"}"}`
	}
	body := fmt.Sprintf(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"step","tool_calls":[{"id":"call_%d","type":"function","function":%s}]}}],"usage":{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020}}`, c.calls, call)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewBufferString(body)), Request: r}, nil
}

// BenchmarkIteration measures one loop iteration's own overhead: building
// and encoding the request (go-openai), decoding the answer, dispatching the
// tool, masking, truncating, logging and hooks. The model and the sandbox
// are in-process fakes that take no time.
func BenchmarkIteration(b *testing.B) {
	const perRun = 20
	iterations := 0
	for b.Loop() {
		sb := &memSandbox{files: map[string][]byte{"/workspace/a.go": []byte("package x\n")}}
		model := &cannedModel{n: perRun - 1}
		cfg := Config{BaseURL: "http://model.invalid/v1", Model: "m", HTTPClient: &http.Client{Transport: model}, Secrets: []string{"secret-token-1", "secret-token-2"}}
		res, err := Run(context.Background(), cfg, sb, Task{System: "system prompt", User: "fix the bug"}, &memLog{}, Hooks{OnStep: func(context.Context, Step) error { return nil }})
		if err != nil || !res.Finished {
			b.Fatalf("Run: %v %+v", err, res)
		}
		iterations += res.Iterations
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iterations), "ns/iteration")
}
