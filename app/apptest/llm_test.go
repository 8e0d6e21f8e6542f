package apptest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func postLLM(tb testing.TB, url, key, body string) (*http.Response, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		tb.Fatalf("decode answer: %v", err)
	}
	return resp, out
}

const llmToolsBody = `{"model":"m","messages":[{"role":"user","content":"hello"}],"tools":[{"type":"function","function":{"name":"finish"}}]}`

func TestLLMScript(t *testing.T) {
	l := NewLLM(t,
		LLMStep{Status: 429, RetryAfter: "2"},
		LLMStep{Content: "thinking", ToolCalls: []LLMToolCall{LLMCall("terminal", map[string]any{"command": "ls"})}},
		LLMStep{Content: "custom summary", ForSummary: true},
	)
	l.RequireKey("k1")

	resp, _ := postLLM(t, l.URL()+"/chat/completions", "wrong", llmToolsBody)
	if resp.StatusCode != 401 {
		t.Fatalf("wrong key: status %d, want 401", resp.StatusCode)
	}
	resp, body := postLLM(t, l.URL()+"/chat/completions", "k1", llmToolsBody)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("step 1: status %d Retry-After %q, want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, ok := body["error"]; !ok {
		t.Fatalf("error body = %v, want an OpenAI error object", body)
	}
	_, body = postLLM(t, l.URL()+"/chat/completions", "k1", llmToolsBody)
	choice := body["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	call := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if call["name"] != "terminal" || call["arguments"] != `{"command":"ls"}` || choice["finish_reason"] != "tool_calls" {
		t.Fatalf("step 2 answer = %v", body)
	}
	usage := body["usage"].(map[string]any)
	if pt := usage["prompt_tokens"].(float64); pt < 5 {
		t.Fatalf("prompt_tokens = %v, want about len(messages)/4", pt)
	}
	// A request without tools gets the ForSummary step.
	_, body = postLLM(t, l.URL()+"/chat/completions", "k1", `{"model":"m","messages":[{"role":"user","content":"sum"}]}`)
	if got := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; got != "custom summary" {
		t.Fatalf("summary = %v", got)
	}
	// Script exhausted: a finish call that says so, on the path without /v1 too.
	_, body = postLLM(t, strings.TrimSuffix(l.URL(), "/v1")+"/chat/completions", "k1", llmToolsBody)
	fn := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "finish" || !strings.Contains(fn["arguments"].(string), "script ended") {
		t.Fatalf("after the script: %v", fn)
	}
	reqs := l.Requests()
	if len(reqs) != 5 || reqs[0].Status != 401 || reqs[1].Status != 429 || reqs[2].Status != 200 {
		t.Fatalf("requests = %+v", reqs)
	}
	if !reqs[2].HasTools() || reqs[3].HasTools() || reqs[2].Messages()[0]["content"] != "hello" {
		t.Fatalf("request accessors wrong: %+v", reqs[2])
	}
	if l.Remaining() != 0 {
		t.Fatalf("Remaining = %d", l.Remaining())
	}
}

func TestLLMAutoSummaryAndDelay(t *testing.T) {
	l := NewLLM(t, LLMStep{Delay: 50 * time.Millisecond, Content: "late"})
	_, body := postLLM(t, l.URL()+"/chat/completions", "", `{"model":"m","messages":[{"role":"user","content":"sum"}]}`)
	got := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if !strings.Contains(got, "condensed") || l.Remaining() != 1 {
		t.Fatalf("auto summary = %q, remaining %d", got, l.Remaining())
	}
	start := time.Now()
	postLLM(t, l.URL()+"/chat/completions", "", llmToolsBody)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("delayed step answered after %v", d)
	}
	resp, _ := postLLM(t, l.URL()+"/chat/completions", "", `{"messages":[]}`)
	if resp.StatusCode != 400 {
		t.Fatalf("empty messages: %d", resp.StatusCode)
	}
}

func TestLoadLLMScript(t *testing.T) {
	steps, err := LoadLLMScript("../../testdata/llm/fix-typo.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 || steps[len(steps)-1].ToolCalls[0].Name != "finish" {
		t.Fatalf("script = %+v", steps)
	}
	if _, err := LoadLLMScript("nope.json"); err == nil {
		t.Fatal("missing file: no error")
	}
}

func TestLLMSetVar(t *testing.T) {
	l := NewLLM(t, LLMStep{Content: "in ${WORKDIR}", ToolCalls: []LLMToolCall{{Name: "t", Arguments: `{"path":"${WORKDIR}/a"}`}}})
	l.SetVar("WORKDIR", "/tmp/w")
	_, body := postLLM(t, l.URL()+"/chat/completions", "", llmToolsBody)
	msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	args := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"]
	if msg["content"] != "in /tmp/w" || args != `{"path":"/tmp/w/a"}` {
		t.Fatalf("expanded step = %v", msg)
	}
}
