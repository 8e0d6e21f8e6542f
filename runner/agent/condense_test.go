package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/sandbox"
)

// trajectory is a scripted 60-step job: each step runs a command with about
// a kilobyte of output, then the model finishes.
func trajectory(steps int) []apptest.LLMStep {
	var out []apptest.LLMStep
	for i := range steps {
		out = append(out, apptest.LLMStep{
			Content:   fmt.Sprintf("Step %d: checking the numbers again.", i+1),
			ToolCalls: []apptest.LLMToolCall{apptest.LLMCall("terminal", map[string]any{"command": fmt.Sprintf("seq %d %d", i, i+250)})},
		})
	}
	return append(out, finishStep("done"))
}

// checkToolPairs verifies that every tool message answers a call of the
// assistant message just before it, and that every call is answered.
func checkToolPairs(tb testing.TB, r apptest.LLMRequest) {
	tb.Helper()
	pending := map[string]bool{}
	for i, m := range r.Messages() {
		switch m["role"] {
		case "tool":
			id, _ := m["tool_call_id"].(string)
			if !pending[id] {
				tb.Fatalf("message %d: tool result %q without its assistant tool call", i, id)
			}
			delete(pending, id)
		default:
			if len(pending) > 0 {
				tb.Fatalf("message %d (%s): tool calls %v not answered", i, m["role"], pending)
			}
			if m["role"] == "assistant" {
				calls, _ := m["tool_calls"].([]any)
				for _, c := range calls {
					pending[c.(map[string]any)["id"].(string)] = true
				}
			}
		}
	}
}

// condensationRun runs the 60-step trajectory and returns the sum of the
// prompt tokens the server reported for every request.
func condensationRun(tb testing.TB, sb sandbox.Sandbox, window int) (Result, []apptest.LLMRequest) {
	tb.Helper()
	llm := apptest.NewLLM(tb, trajectory(60)...)
	cfg := testConfig(llm)
	cfg.MaxIterations = 100
	cfg.ContextWindow = window
	cfg.KeepLast = 5
	res, _ := mustRun(tb, cfg, sb, Task{User: "Count the numbers."}, Hooks{})
	if !res.Finished {
		tb.Fatalf("result = %+v", res)
	}
	return res, llm.Requests()
}

func TestCondensationHalvesPromptTokens(t *testing.T) {
	sb := mustSandbox(t, nil)
	full, fullReqs := condensationRun(t, sb, 1<<30)
	cond, condReqs := condensationRun(t, sb, 8000)
	if full.Condensations != 0 || cond.Condensations == 0 {
		t.Fatalf("condensations: %d without, %d with", full.Condensations, cond.Condensations)
	}
	t.Logf("60-step trajectory: prompt tokens %d without condensation, %d with (%d condensations, ratio %.2f)",
		full.PromptTokens, cond.PromptTokens, cond.Condensations, float64(cond.PromptTokens)/float64(full.PromptTokens))
	if 2*cond.PromptTokens > full.PromptTokens {
		t.Errorf("condensed prompt tokens %d are more than half of %d", cond.PromptTokens, full.PromptTokens)
	}
	if len(fullReqs) != 61 {
		t.Errorf("%d requests without condensation, want 61", len(fullReqs))
	}
	summaries := 0
	for _, r := range condReqs {
		if !r.HasTools() {
			summaries++
			continue
		}
		checkToolPairs(t, r)
		msgs := r.Messages()
		if msgs[0]["role"] != "system" || msgs[1]["content"] != "Count the numbers." {
			t.Fatalf("system prompt or first user message lost: %v", msgs[:2])
		}
		if r.PromptTokens() > 8000 {
			t.Errorf("a request of %d tokens passed the 8000-token window", r.PromptTokens())
		}
	}
	if summaries != cond.Condensations {
		t.Errorf("%d summary requests for %d condensations", summaries, cond.Condensations)
	}
	last := condReqs[len(condReqs)-1].Messages()
	if s, _ := last[2]["content"].(string); !strings.HasPrefix(s, summaryPrefix) || !strings.Contains(s, "condensed") {
		t.Errorf("third message is not the model's summary: %q", s)
	}
}

func TestCondensationFallsBackToMechanicalSummary(t *testing.T) {
	sb := mustSandbox(t, nil)
	steps := trajectory(8)
	// The summary request fails with a 400 (not retried): the loop goes on
	// with a mechanical summary of the dropped tool calls.
	steps = append(steps[:3], append([]apptest.LLMStep{{ForSummary: true, Status: 400}}, steps[3:]...)...)
	llm := apptest.NewLLM(t, steps...)
	cfg := testConfig(llm)
	cfg.ContextWindow = 1200
	cfg.KeepLast = 2
	res, log := mustRun(t, cfg, sb, Task{User: "Count."}, Hooks{})
	if !res.Finished || res.Condensations == 0 {
		t.Fatalf("result = %+v", res)
	}
	ev := log.kind(EventCondense)
	if ev[0].Reason != "mechanical" || !strings.Contains(ev[0].Content, "- called terminal {\"command\":\"seq 0 250\"}") {
		t.Fatalf("first condensation = %+v", ev[0])
	}
	for _, r := range llm.Requests() {
		if r.HasTools() {
			checkToolPairs(t, r)
		}
	}
}

func BenchmarkCondensation(b *testing.B) {
	sb := mustSandbox(b, nil)
	for b.Loop() {
		full, _ := condensationRun(b, sb, 1<<30)
		cond, _ := condensationRun(b, sb, 8000)
		b.ReportMetric(float64(full.PromptTokens), "prompt_tokens_full")
		b.ReportMetric(float64(cond.PromptTokens), "prompt_tokens_condensed")
		b.ReportMetric(float64(cond.PromptTokens)/float64(full.PromptTokens), "ratio")
	}
}

// TestCondensationKeepsFewerTurnsWhenTheyDoNotFit: with a small window and
// large observations, condensation keeps fewer than KeepLast recent turns,
// so requests stay under the window instead of failing at the provider.
func TestCondensationKeepsFewerTurnsWhenTheyDoNotFit(t *testing.T) {
	sb := mustSandbox(t, nil)
	var steps []apptest.LLMStep
	for i := range 20 {
		steps = append(steps, apptest.LLMTool("terminal", map[string]any{"command": fmt.Sprintf("seq %d %d", i, i+700)}))
	}
	llm := apptest.NewLLM(t, append(steps, finishStep("done"))...)
	cfg := testConfig(llm)
	cfg.MaxIterations = 100
	cfg.ContextWindow = 4000 // each observation is about 900 tokens
	cfg.KeepLast = 10        // ten of them alone would not fit
	res, _ := mustRun(t, cfg, sb, Task{User: "Count the numbers."}, Hooks{})
	if !res.Finished || res.Condensations == 0 {
		t.Fatalf("result = %+v", res)
	}
	for i, r := range llm.Requests() {
		if r.HasTools() && r.PromptTokens() > cfg.ContextWindow {
			t.Errorf("request %d has %d prompt tokens, over the %d window", i, r.PromptTokens(), cfg.ContextWindow)
		}
		checkToolPairs(t, r)
	}
}
