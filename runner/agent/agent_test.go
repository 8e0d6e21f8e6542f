package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/skills"
)

func TestRunToolsAndAliases(t *testing.T) {
	sb := mustSandbox(t, nil)
	f := path.Join(sb.WorkDir(), "hello.txt")
	llm := apptest.NewLLM(t,
		apptest.LLMStep{Content: "Let me look.", ToolCalls: []apptest.LLMToolCall{
			apptest.LLMCall("terminal", map[string]any{"command": "mkdir -p sub && cd sub && echo hi-there"}),
			apptest.LLMCall("terminal", map[string]any{"command": "pwd; false"}),
		}},
		apptest.LLMTool("execute_bash", map[string]any{"command": "echo alias-ok", "is_input": "false"}),
		apptest.LLMTool("str_replace_editor", map[string]any{"command": "create", "path": f, "file_text": "hello\n"}),
		apptest.LLMTool("file_editor", map[string]any{"command": "str_replace", "path": f, "old_str": "hello", "new_str": "bye"}),
		apptest.LLMTool("task_tracker", map[string]any{"command": "view"}),
		apptest.LLMTool("task_tracker", map[string]any{"command": "plan", "task_list": []map[string]string{{"title": "explore", "status": "done"}, {"title": "fix", "status": "in_progress", "notes": "the bug"}}}),
		apptest.LLMTool("task_tracker", map[string]any{"command": "plan", "task_list": []map[string]string{{"title": "x", "status": "blocked"}}}),
		apptest.LLMTool("task_tracker", map[string]any{"command": "view"}),
		apptest.LLMTool("think", map[string]any{"thought": "the fix is simple"}),
		apptest.LLMTool("terminal", map[string]any{"command": "", "reset": true}),
		apptest.LLMTool("terminal", map[string]any{"command": "pwd"}),
		finishStep("Changed hello to bye.\n\nTests: none."),
	)
	var steps []Step
	res, log := mustRun(t, testConfig(llm), sb, Task{User: "Fix hello."}, Hooks{OnStep: func(_ context.Context, s Step) error {
		steps = append(steps, s)
		return nil
	}})
	if !res.Finished || res.Stop != StopFinished || res.Message != "Changed hello to bye.\n\nTests: none." {
		t.Fatalf("result = %+v", res)
	}
	if res.Iterations != 12 || res.PromptTokens == 0 || res.CompletionTokens == 0 {
		t.Errorf("iterations %d, tokens %d+%d", res.Iterations, res.PromptTokens, res.CompletionTokens)
	}
	reqs := llm.Requests()
	if got := reqs[0].Auth; got != "Bearer test-key" {
		t.Errorf("Authorization = %q", got)
	}
	// The observations of each request, in order.
	obs := toolResults(reqs[len(reqs)-1])
	want := [][]string{
		{"hi-there", "[Current working directory: " + sb.WorkDir() + "/sub]", "[Command finished with exit code 0]"},
		{sb.WorkDir() + "/sub", "[Command finished with exit code 1]"},
		{"alias-ok"},
		{"File created successfully at: " + f},
		{"has been edited", "     1\tbye"},
		{`No task list yet. Use the "plan" command`},
		{"Task list has been updated with 2 item(s).", "1. [done] [1] explore", "2. [in_progress] [2] fix", "the bug"},
		{"ERROR:", `status "blocked"; use todo, in_progress or done`},
		{"# Task List", "[in_progress] [2] fix"},
		{"Your thought has been logged."},
		{"[Command finished with exit code"},
		{"[Current working directory: " + sb.WorkDir() + "]"},
	}
	if len(obs) != len(want) {
		t.Fatalf("%d observations, want %d:\n%s", len(obs), len(want), strings.Join(obs, "\n---\n"))
	}
	for i, w := range want {
		if !contains(obs[i], w...) {
			t.Errorf("observation %d = %q, want %q", i, obs[i], w)
		}
	}
	if got, _ := sb.ReadFile(context.Background(), f); string(got) != "bye\n" {
		t.Errorf("file = %q", got)
	}
	// Hooks: one step per tool call, with FilesChanged and the task list.
	if len(steps) != 13 {
		t.Fatalf("%d steps, want 13", len(steps))
	}
	if !steps[0].FilesChanged || !steps[4].FilesChanged || steps[5].FilesChanged || steps[9].FilesChanged {
		t.Errorf("FilesChanged wrong: %+v", steps)
	}
	if len(steps[9].Tasks) != 2 || steps[9].Tasks[1].Status != "in_progress" || len(res.Tasks) != 2 {
		t.Errorf("tasks = %+v / %+v", steps[9].Tasks, res.Tasks)
	}
	// Tools offered with OpenHands names and schemas.
	var body struct {
		Tools []struct {
			Function struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Function.Name)
	}
	if strings.Join(names, ",") != "terminal,file_editor,task_tracker,think,finish" {
		t.Errorf("tools = %v", names)
	}
	props := body.Tools[1].Function.Parameters["properties"].(map[string]any)
	for _, k := range []string{"command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range"} {
		if _, ok := props[k]; !ok {
			t.Errorf("file_editor has no %s parameter", k)
		}
	}
	// The log can replay the conversation.
	if n := len(log.kind(EventTool)); n != 13 {
		t.Errorf("%d tool events, want 13", n)
	}
	if st := log.kind(EventStop); len(st) != 1 || st[0].Stop != StopFinished {
		t.Errorf("stop events = %+v", st)
	}
}

func TestTerminalInput(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t,
		apptest.LLMTool("terminal", map[string]any{"command": "printf 'name? '; read -r x; echo got:$x", "timeout": 1}),
		apptest.LLMTool("terminal", map[string]any{"command": "hello", "is_input": true}),
		apptest.LLMTool("terminal", map[string]any{"command": "x", "is_input": true, "reset": true}),
		apptest.LLMTool("terminal", map[string]any{"command": "sleep 5", "timeout": 0.5}),
		finishStep("done"),
	)
	mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
	reqs := llm.Requests()
	obs := toolResults(reqs[len(reqs)-1])
	if len(obs) != 4 {
		t.Fatalf("observations: %q", obs)
	}
	if !strings.Contains(obs[0], "still running") || strings.Contains(obs[0], "exit code") {
		t.Errorf("running command: %q", obs[0])
	}
	if !contains(obs[1], "got:hello", "exit code 0") {
		t.Errorf("input: %q", obs[1])
	}
	if !strings.Contains(obs[2], "reset=true cannot be combined with is_input=true") {
		t.Errorf("reset with input: %q", obs[2])
	}
	if !contains(obs[3], "ran past its timeout", "exit code 130") {
		t.Errorf("timeout: %q", obs[3])
	}
}

func TestInvalidAndUnknownTools(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t,
		apptest.LLMStep{ToolCalls: []apptest.LLMToolCall{{Name: "terminal", Arguments: `{"command": "ls"`}}},
		apptest.LLMStep{ToolCalls: []apptest.LLMToolCall{{Name: "browse", Arguments: `{"url": "x"}`}}},
		apptest.LLMStep{ToolCalls: []apptest.LLMToolCall{{Name: "terminal", Arguments: `{"command": 5}`}}},
		apptest.LLMStep{ToolCalls: []apptest.LLMToolCall{{Name: "finish", Arguments: `{}`}}},
		finishStep("ok"),
	)
	res, _ := mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
	if !res.Finished {
		t.Fatalf("result = %+v", res)
	}
	obs := toolResults(llm.Requests()[4])
	want := []string{"not valid JSON", `Unknown tool "browse". The tools are: terminal, file_editor, task_tracker, think, finish.`,
		`parameter "command" has the wrong type`, "Parameter `message` is required for finish"}
	for i, w := range want {
		if !strings.HasPrefix(obs[i], "ERROR:") || !strings.Contains(obs[i], w) {
			t.Errorf("observation %d = %q, want %q", i, obs[i], w)
		}
	}
}

func TestSkills(t *testing.T) {
	sb := mustSandbox(t, nil)
	set := skills.Set{
		{Name: "repo", Content: "ALWAYS-ON-RULES", Path: "AGENTS.md"},
		{Name: "gitskill", Triggers: []string{"git"}, Content: "GIT-SKILL-BODY"},
		{Name: "deploy", Triggers: []string{"deploy"}, Content: "DEPLOY-SKILL-BODY"},
	}
	llm := apptest.NewLLM(t,
		apptest.LLMTool("think", map[string]any{"thought": "a"}),
		apptest.LLMTool("think", map[string]any{"thought": "b"}),
		apptest.LLMTool("think", map[string]any{"thought": "c"}),
		finishStep("ok"),
	)
	later := [][]string{nil, {"please also use Git for this"}, {"and git again, then deploy"}}
	calls := 0
	mustRun(t, testConfig(llm), sb, Task{User: "Look at github.com/x/y and fix it.", Skills: set}, Hooks{Messages: func(context.Context) []string {
		calls++
		if calls-1 < len(later) {
			return later[calls-1]
		}
		return nil
	}})
	reqs := llm.Requests()
	first := reqs[0].Messages()
	if sys := first[0]["content"].(string); !contains(sys, "<REPOSITORY_INSTRUCTIONS>", "ALWAYS-ON-RULES") || strings.Contains(sys, "GIT-SKILL") {
		t.Errorf("system prompt = %q", sys)
	}
	if u := first[1]["content"].(string); strings.Contains(u, "GIT-SKILL-BODY") {
		t.Errorf("'git' inside 'github' triggered the skill: %q", u)
	}
	all := reqs[len(reqs)-1].Messages()
	var users []string
	for _, m := range all {
		if m["role"] == "user" {
			users = append(users, m["content"].(string))
		}
	}
	if len(users) != 3 {
		t.Fatalf("user messages: %q", users)
	}
	if !contains(users[1], "use Git for this", "<EXTRA_INFO>", "GIT-SKILL-BODY") {
		t.Errorf("second user message = %q", users[1])
	}
	if strings.Contains(users[2], "GIT-SKILL-BODY") || !contains(users[2], "DEPLOY-SKILL-BODY") {
		t.Errorf("third user message = %q (git once per job, deploy now)", users[2])
	}
}

func TestBudgets(t *testing.T) {
	sb := mustSandbox(t, nil)
	think := func(i int) apptest.LLMStep {
		return apptest.LLMTool("think", map[string]any{"thought": strings.Repeat("x", i)})
	}
	t.Run("max_iterations", func(t *testing.T) {
		llm := apptest.NewLLM(t, think(1), think(2), think(3), think(4), finishStep("late"))
		cfg := testConfig(llm)
		cfg.MaxIterations = 3
		res, _ := mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
		if res.Finished || res.Stop != StopMaxIterations || res.Reason != "stopped after 3 iterations (llm.max_iterations)" || len(llm.Requests()) != 3 {
			t.Fatalf("result = %+v, %d requests", res, len(llm.Requests()))
		}
	})
	t.Run("max_tokens", func(t *testing.T) {
		llm := apptest.NewLLM(t, think(1), think(2), think(3), think(4), finishStep("late"))
		cfg := testConfig(llm)
		cfg.MaxTokens = 1
		res, _ := mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
		if res.Stop != StopMaxTokens || !contains(res.Reason, "the budget is 1 (llm.max_tokens)") || res.Iterations != 1 {
			t.Fatalf("result = %+v", res)
		}
		cfg.MaxTokens = 2 * llm.Requests()[0].PromptTokens()
		llm2 := apptest.NewLLM(t, think(1), think(2), think(3), think(4), finishStep("late"))
		cfg.BaseURL = llm2.URL()
		res, _ = mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
		if res.Stop != StopMaxTokens || res.Iterations != 2 || res.PromptTokens+res.CompletionTokens < cfg.MaxTokens {
			t.Fatalf("result = %+v", res)
		}
	})
	t.Run("wall_clock", func(t *testing.T) {
		llm := apptest.NewLLM(t, apptest.LLMTool("terminal", map[string]any{"command": "sleep 30", "timeout": 60}), finishStep("late"))
		cfg := testConfig(llm)
		cfg.WallClock = 700 * time.Millisecond
		start := time.Now()
		res, _ := mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
		if res.Stop != StopWallClock || res.Reason != "stopped after 700ms, the wall-clock limit (llm.wall_clock)" {
			t.Fatalf("result = %+v", res)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("wall clock stop took %v", d)
		}
	})
}

func TestCancel(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t, apptest.LLMTool("think", map[string]any{"thought": "a"}), apptest.LLMTool("think", map[string]any{"thought": "b"}), finishStep("x"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, testConfig(llm), sb, Task{System: "s", User: "go"}, nil, Hooks{OnStep: func(context.Context, Step) error {
		cancel()
		return ctx.Err()
	}})
	if !errors.Is(err, context.Canceled) || res.Stop != StopCancelled || len(llm.Requests()) != 1 {
		t.Fatalf("err %v, result %+v, %d requests", err, res, len(llm.Requests()))
	}
	// A hook error that is not a cancellation stops with "hook".
	llm2 := apptest.NewLLM(t, apptest.LLMTool("think", map[string]any{"thought": "a"}))
	res, err = Run(context.Background(), testConfig(llm2), sb, Task{User: "go"}, nil, Hooks{OnStep: func(context.Context, Step) error {
		return errors.New("disk full")
	}})
	if err == nil || res.Stop != StopHook || !strings.Contains(res.Reason, "disk full") {
		t.Fatalf("err %v, result %+v", err, res)
	}
}

func TestRetries(t *testing.T) {
	sb := mustSandbox(t, nil)
	t.Run("429 with Retry-After and 500", func(t *testing.T) {
		llm := apptest.NewLLM(t,
			apptest.LLMStep{Status: 429, RetryAfter: "1"},
			apptest.LLMStep{Status: 500},
			apptest.LLMStep{Status: 503},
			finishStep("ok"),
		)
		res, log := mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
		reqs := llm.Requests()
		if !res.Finished || len(reqs) != 4 || res.Iterations != 1 {
			t.Fatalf("result %+v, %d requests", res, len(reqs))
		}
		if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
			t.Errorf("retry after 429 came %v later, Retry-After said 1s", gap)
		}
		if gap := reqs[2].At.Sub(reqs[1].At); gap > 500*time.Millisecond {
			t.Errorf("retry after 500 came %v later, base delay is 1ms", gap)
		}
		if n := len(log.kind(EventRetry)); n != 3 {
			t.Errorf("%d retry events, want 3", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		llm := apptest.NewLLM(t, apptest.LLMStep{Delay: 2 * time.Second, Content: "late"}, finishStep("ok"))
		cfg := testConfig(llm)
		cfg.RequestTimeout = 200 * time.Millisecond
		res, _ := mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
		if !res.Finished || len(llm.Requests()) != 2 {
			t.Fatalf("result %+v, %d requests", res, len(llm.Requests()))
		}
	})
	t.Run("gives up", func(t *testing.T) {
		llm := apptest.NewLLM(t, apptest.LLMStep{Status: 500}, apptest.LLMStep{Status: 500}, apptest.LLMStep{Status: 500}, apptest.LLMStep{Status: 500}, finishStep("never"))
		res, err := Run(context.Background(), testConfig(llm), sb, Task{User: "go"}, nil, Hooks{})
		if err == nil || res.Stop != StopLLMError || len(llm.Requests()) != 4 || !strings.Contains(err.Error(), "after 4 attempt(s)") {
			t.Fatalf("err %v, result %+v, %d requests", err, res, len(llm.Requests()))
		}
	})
	t.Run("401 is not retried", func(t *testing.T) {
		llm := apptest.NewLLM(t, finishStep("never"))
		llm.RequireKey("other")
		res, err := Run(context.Background(), testConfig(llm), sb, Task{User: "go"}, nil, Hooks{})
		if err == nil || res.Stop != StopLLMError || len(llm.Requests()) != 1 {
			t.Fatalf("err %v, result %+v, %d requests", err, res, len(llm.Requests()))
		}
	})
}

func TestStuck(t *testing.T) {
	sb := mustSandbox(t, nil)
	t.Run("repeated action", func(t *testing.T) {
		same := apptest.LLMTool("terminal", map[string]any{"command": "echo same"})
		llm := apptest.NewLLM(t, same, same, same, same, same, finishStep("never"))
		res, log := mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
		if res.Stop != StopStuck || res.Iterations != 4 || !strings.Contains(res.Reason, "same terminal call with the same result 4 times") {
			t.Fatalf("result %+v", res)
		}
		reqs := llm.Requests()
		msgs := reqs[3].Messages()
		if last := msgs[len(msgs)-1]; last["role"] != "user" || !strings.Contains(last["content"].(string), "Do not repeat it") {
			t.Errorf("no nudge before the 4th request: %v", last)
		}
		if len(log.kind(EventUser)) != 2 {
			t.Errorf("user events: %+v", log.kind(EventUser))
		}
	})
	t.Run("no tool calls", func(t *testing.T) {
		llm := apptest.NewLLM(t, apptest.LLMStep{Content: "I think it works"}, apptest.LLMStep{Content: "Done!"}, apptest.LLMStep{Content: "Really done."}, finishStep("never"))
		res, _ := mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
		if res.Stop != StopStuck || res.Iterations != 3 || !strings.Contains(res.Reason, "3 times in a row without calling a tool") {
			t.Fatalf("result %+v", res)
		}
		msgs := llm.Requests()[1].Messages()
		if last := msgs[len(msgs)-1]; last["role"] != "user" || !strings.Contains(last["content"].(string), "no tool call") {
			t.Errorf("no nudge: %v", last)
		}
	})
	t.Run("nudge then recover", func(t *testing.T) {
		llm := apptest.NewLLM(t, apptest.LLMStep{Content: "hmm"}, finishStep("recovered"))
		res, _ := mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
		if !res.Finished || res.Message != "recovered" {
			t.Fatalf("result %+v", res)
		}
	})
}

func TestSecretsMasked(t *testing.T) {
	const secret = "ghs_S3cretTokenValue42"
	sb := mustSandbox(t, map[string]string{"LEAK": secret})
	llm := apptest.NewLLM(t,
		apptest.LLMTool("terminal", map[string]any{"command": "echo token=$LEAK; echo $LEAK | base64"}),
		apptest.LLMTool("terminal", map[string]any{"command": "printf %s \"$LEAK\" | base64"}),
		finishStep("The token is "+secret),
	)
	cfg := testConfig(llm)
	cfg.Secrets = []string{secret, "", "ab"}
	res, log := mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
	if res.Message != "The token is ***" {
		t.Errorf("finish message = %q", res.Message)
	}
	reqs := llm.Requests()
	obs := toolResults(reqs[len(reqs)-1])
	if !strings.Contains(obs[0], "token=***") || !strings.Contains(obs[1], "***") {
		t.Errorf("observations = %q", obs)
	}
	for i, r := range reqs {
		if strings.Contains(string(r.Body), secret) || strings.Contains(string(r.Body), "Z2hzX1MzY3JldFRva2VuVmFsdWU0Mg") {
			t.Errorf("request %d carries the secret or its base64 form", i)
		}
	}
	logged, err := json.Marshal(log.all())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logged), secret) || strings.Contains(string(logged), "Z2hzX1MzY3JldFRva2VuVmFsdWU0Mg") {
		t.Errorf("the event log carries the secret")
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	if _, err := Run(context.Background(), Config{}, nil, Task{User: "x"}, nil, Hooks{}); err == nil {
		t.Error("nil sandbox accepted")
	}
	sb := mustSandbox(t, nil)
	if _, err := Run(context.Background(), Config{}, sb, Task{User: " "}, nil, Hooks{}); err == nil {
		t.Error("empty task accepted")
	}
}

func TestCancelDuringCommand(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t, apptest.LLMTool("terminal", map[string]any{"command": "sleep 30", "timeout": 60}), finishStep("late"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, testConfig(llm), sb, Task{User: "go"}, nil, Hooks{})
	if !errors.Is(err, context.Canceled) || res.Stop != StopCancelled {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
}

func TestLongObservationCut(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t, apptest.LLMTool("terminal", map[string]any{"command": "seq 1 20000"}), finishStep("ok"))
	cfg := testConfig(llm)
	cfg.MaxObservation = 1000
	mustRun(t, cfg, sb, Task{User: "go"}, Hooks{})
	obs := lastToolResult(t, llm)
	if len(obs) > 1100 || !strings.HasPrefix(obs, "1\n2\n") || !contains(obs, "characters cut", "[Command finished with exit code 0]") {
		t.Fatalf("observation (%d bytes) = %q", len(obs), obs)
	}
}

// TestDirectoryViewLeavesARunningCommandAlone: listing a directory goes
// through the shell, so while a command waits for input the editor says so
// instead of interrupting it.
func TestDirectoryViewLeavesARunningCommandAlone(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t,
		apptest.LLMTool("terminal", map[string]any{"command": "printf 'name? '; read -r x; echo got:$x", "timeout": 1}),
		apptest.LLMTool("file_editor", map[string]any{"command": "view", "path": sb.WorkDir()}),
		apptest.LLMTool("terminal", map[string]any{"command": "ada", "is_input": true}),
		apptest.LLMTool("file_editor", map[string]any{"command": "view", "path": sb.WorkDir()}),
		finishStep("done"),
	)
	mustRun(t, testConfig(llm), sb, Task{User: "go"}, Hooks{})
	reqs := llm.Requests()
	obs := toolResults(reqs[len(reqs)-1])
	if len(obs) != 4 {
		t.Fatalf("observations: %q", obs)
	}
	if !strings.Contains(obs[1], "still running in the terminal") {
		t.Errorf("directory view while a command runs: %q", obs[1])
	}
	if !contains(obs[2], "got:ada", "exit code 0") {
		t.Errorf("the waiting command lost its input: %q", obs[2])
	}
	if !strings.Contains(obs[3], "files and directories up to 2 levels deep") {
		t.Errorf("directory view afterwards: %q", obs[3])
	}
}

// TestModelErrorHelp runs the loop against a model that fails in each of
// the ways people meet, and checks the sentence they are given names what
// to check.
func TestModelErrorHelp(t *testing.T) {
	sb := mustSandbox(t, nil)
	fails := func(status int) []apptest.LLMStep {
		return []apptest.LLMStep{{Status: status}, {Status: status}, {Status: status}, {Status: status}}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	tests := []struct {
		name string
		cfg  func() Config
		want []string
	}{
		{"wrong key", func() Config {
			llm := apptest.NewLLM(t, finishStep("never"))
			llm.RequireKey("the-right-key")
			return testConfig(llm)
		}, []string{"refused the API key", "HTTP 401", "Incorrect API key provided", "`llm.api_key`", "OPENAI_API_KEY"}},
		{"unknown model", func() Config { return testConfig(apptest.NewLLM(t, fails(404)...)) },
			[]string{"no such model", "HTTP 404", "`llm.model`"}},
		{"rate limited", func() Config { return testConfig(apptest.NewLLM(t, fails(429)...)) },
			[]string{"HTTP 429", "Try again later"}},
		{"provider down", func() Config { return testConfig(apptest.NewLLM(t, fails(503)...)) },
			[]string{"kept failing", "HTTP 503"}},
		{"nothing listening", func() Config {
			cfg := testConfig(apptest.NewLLM(t))
			cfg.BaseURL = closedURL + "/v1"
			return cfg
		}, []string{"could not get an answer", "`llm.base_url`", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), tt.cfg(), sb, Task{System: "s", User: "go"}, nil, Hooks{})
			if err == nil || res.Stop != StopLLMError {
				t.Fatalf("Run = %+v, %v; want a model error", res, err)
			}
			help, ok := ModelErrorHelp(err)
			if !ok {
				t.Fatalf("ModelErrorHelp(%v) says it is not a model error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(help, w) {
					t.Errorf("help %q lacks %q", help, w)
				}
			}
		})
	}
	if _, ok := ModelErrorHelp(errors.New("the sandbox died")); ok {
		t.Error("ModelErrorHelp claims an error that is not the model's")
	}
}
