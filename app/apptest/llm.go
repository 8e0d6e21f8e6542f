package apptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// LLMStep is one scripted answer of the LLM server: an assistant message with
// optional tool calls, or an HTTP error.
type LLMStep struct {
	// Content is the assistant's text.
	Content string `json:"content,omitempty"`
	// ToolCalls are the tool calls the assistant makes.
	ToolCalls []LLMToolCall `json:"tool_calls,omitempty"`
	// Status, when non-zero, answers with this HTTP error status instead.
	Status int `json:"status,omitempty"`
	// RetryAfter is sent as the Retry-After header with an error Status.
	RetryAfter string `json:"retry_after,omitempty"`
	// Delay holds the answer back (to test client time-outs).
	Delay time.Duration `json:"delay,omitempty"`
	// ForSummary marks a step meant for a request without tools (the agent's
	// condensation request). Requests without tools take the next step only
	// when it is marked so; otherwise they get an automatic summary.
	ForSummary bool `json:"for_summary,omitempty"`
}

// LLMToolCall is one scripted tool call.
type LLMToolCall struct {
	// ID is the call's id; "call_<n>" when empty.
	ID string `json:"id,omitempty"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments, sent as is (it may be invalid on purpose).
	Arguments string `json:"arguments"`
}

// LLMCall builds a tool call whose arguments are args marshalled to JSON;
// if args do not marshal, the arguments are the error text (invalid JSON).
func LLMCall(name string, args any) LLMToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		return LLMToolCall{Name: name, Arguments: "apptest.LLMCall: " + err.Error()}
	}
	return LLMToolCall{Name: name, Arguments: string(b)}
}

// LLMTool is a step with a single tool call, a shorthand for scripts.
func LLMTool(name string, args any) LLMStep {
	return LLMStep{ToolCalls: []LLMToolCall{LLMCall(name, args)}}
}

// LLMRequest is one request the server received.
type LLMRequest struct {
	Path string    `json:"path"`
	At   time.Time `json:"at"`
	// Auth is the Authorization header.
	Auth string `json:"auth,omitempty"`
	// Body is the raw JSON request body.
	Body json.RawMessage `json:"body"`
	// Status is the HTTP status the server answered with.
	Status int `json:"status"`
}

// Messages decodes the request's messages as generic JSON objects.
func (r LLMRequest) Messages() []map[string]any {
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	return body.Messages
}

// HasTools reports whether the request offered tools to the model.
func (r LLMRequest) HasTools() bool {
	var body struct {
		Tools []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(r.Body, &body)
	return len(body.Tools) > 0
}

// PromptTokens is the prompt token figure the server reported (or would
// have reported) for this request: the JSON size of its messages over four.
func (r LLMRequest) PromptTokens() int {
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	return len(body.Messages)/4 + 1
}

// LLM is a scripted OpenAI-compatible chat completions server. Each POST to
// /v1/chat/completions (or /chat/completions) is answered by the next step;
// when the script runs out it answers with a finish call saying so.
type LLM struct {
	srv *httptest.Server

	mu       sync.Mutex
	vars     map[string]string
	reqVars  map[string]*regexp.Regexp
	steps    []LLMStep
	next     int
	apiKey   string
	requests []LLMRequest
	calls    int
}

// NewLLMServer starts a scripted server; call Close when done.
func NewLLMServer(steps ...LLMStep) *LLM {
	l := &LLM{steps: steps}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", l.serve)
	mux.HandleFunc("POST /chat/completions", l.serve)
	l.srv = httptest.NewServer(mux)
	return l
}

// NewLLM starts a scripted server that is closed when the test ends.
func NewLLM(tb testing.TB, steps ...LLMStep) *LLM {
	tb.Helper()
	l := NewLLMServer(steps...)
	tb.Cleanup(l.Close)
	return l
}

// LoadLLMScript reads a JSON array of steps, e.g. a recorded conversation
// under testdata/llm.
func LoadLLMScript(path string) ([]LLMStep, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read LLM script: %w", err)
	}
	var steps []LLMStep
	if err := json.Unmarshal(data, &steps); err != nil {
		return nil, fmt.Errorf("parse LLM script %s: %w", path, err)
	}
	return steps, nil
}

// URL is the base URL to configure as llm.base_url (it ends in /v1).
func (l *LLM) URL() string { return l.srv.URL + "/v1" }

// RequireKey makes the server answer 401 unless requests carry "Bearer key".
func (l *LLM) RequireKey(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.apiKey = key
}

// SetVar makes the server replace ${name} by value in the content and tool
// arguments of the steps it sends, e.g. ${WORKDIR} in a recorded script
// replayed against a sandbox whose workspace lives elsewhere.
func (l *LLM) SetVar(name, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.vars == nil {
		l.vars = map[string]string{}
	}
	l.vars[name] = value
}

// SetVarFromRequest makes the server take ${name} from each request's
// messages: the first submatch of re in the first message it matches (for
// example the workspace path the system prompt names), so a recorded
// script replays against a sandbox whose paths are only known at run time.
func (l *LLM) SetVarFromRequest(name string, re *regexp.Regexp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reqVars == nil {
		l.reqVars = map[string]*regexp.Regexp{}
	}
	l.reqVars[name] = re
}

// varsFrom fills the request-derived variables from a request's messages.
func (l *LLM) varsFrom(messages []json.RawMessage) {
	for name, re := range l.reqVars {
		for _, raw := range messages {
			var m struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			if sub := re.FindStringSubmatch(m.Content); len(sub) > 1 {
				if l.vars == nil {
					l.vars = map[string]string{}
				}
				l.vars[name] = sub[1]
				break
			}
		}
	}
}

func (l *LLM) expand(step LLMStep) LLMStep {
	if len(l.vars) == 0 {
		return step
	}
	pairs := make([]string, 0, 2*len(l.vars))
	for k, v := range l.vars {
		pairs = append(pairs, "${"+k+"}", v)
	}
	r := strings.NewReplacer(pairs...)
	step.Content = r.Replace(step.Content)
	calls := make([]LLMToolCall, len(step.ToolCalls))
	for i, tc := range step.ToolCalls {
		tc.Arguments = r.Replace(tc.Arguments)
		calls[i] = tc
	}
	step.ToolCalls = calls
	return step
}

// Requests returns a copy of every request received so far, in order.
func (l *LLM) Requests() []LLMRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LLMRequest(nil), l.requests...)
}

// Remaining is the number of steps not used yet.
func (l *LLM) Remaining() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.steps) - l.next
}

// Close stops the server.
func (l *LLM) Close() { l.srv.Close() }

func (l *LLM) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Model    string            `json:"model"`
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	status := http.StatusOK
	l.mu.Lock()
	rec := LLMRequest{Path: r.URL.Path, At: at, Auth: r.Header.Get("Authorization"), Body: body}
	idx := len(l.requests)
	l.requests = append(l.requests, rec)
	var step LLMStep
	var scripted bool
	switch {
	case l.apiKey != "" && rec.Auth != "Bearer "+l.apiKey:
		status = http.StatusUnauthorized
	case json.Unmarshal(body, &req) != nil || len(req.Messages) == 0:
		status = http.StatusBadRequest
	default:
		l.varsFrom(req.Messages)
		if l.next < len(l.steps) && (len(req.Tools) > 0 || l.steps[l.next].ForSummary) {
			step, scripted = l.expand(l.steps[l.next]), true
			l.next++
		}
	}
	l.calls++
	call := l.calls
	l.mu.Unlock()

	setStatus := func(s int) {
		l.mu.Lock()
		l.requests[idx].Status = s
		l.mu.Unlock()
	}
	switch status {
	case http.StatusUnauthorized:
		setStatus(status)
		writeLLMError(w, status, "invalid_api_key", "Incorrect API key provided.")
		return
	case http.StatusBadRequest:
		setStatus(status)
		writeLLMError(w, status, "invalid_request_error", "request body is not a chat completion request with messages")
		return
	}
	if step.Delay > 0 {
		select {
		case <-time.After(step.Delay):
		case <-r.Context().Done():
			setStatus(499)
			return
		}
	}
	if step.Status != 0 {
		setStatus(step.Status)
		if step.RetryAfter != "" {
			w.Header().Set("Retry-After", step.RetryAfter)
		}
		writeLLMError(w, step.Status, "server_error", fmt.Sprintf("scripted error %d", step.Status))
		return
	}
	switch {
	case len(req.Tools) == 0 && !scripted:
		step = LLMStep{Content: fmt.Sprintf("Summary of the earlier steps (%d messages were condensed).", len(req.Messages))}
	case !scripted:
		step = LLMTool("finish", map[string]string{"message": "the LLM script ended: no step left for request " + fmt.Sprint(idx+1)})
	}
	setStatus(http.StatusOK)
	writeLLMAnswer(w, req.Model, call, step, len(joinRaw(req.Messages))/4+1)
}

func joinRaw(msgs []json.RawMessage) []byte {
	b, _ := json.Marshal(msgs)
	return b
}

func writeLLMError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ}})
}

func writeLLMAnswer(w http.ResponseWriter, model string, call int, step LLMStep, promptTokens int) {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	msg := map[string]any{"role": "assistant", "content": step.Content}
	completion := len(step.Content)
	var calls []toolCall
	for i, tc := range step.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", call, i)
		}
		calls = append(calls, toolCall{ID: id, Type: "function", Function: fn{Name: tc.Name, Arguments: tc.Arguments}})
		completion += len(tc.Name) + len(tc.Arguments)
	}
	finish := "stop"
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	completion = completion/4 + 1
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", call),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   strings.TrimSpace(model),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]int{
			"prompt_tokens":     promptTokens,
			"completion_tokens": completion,
			"total_tokens":      promptTokens + completion,
		},
	})
}
