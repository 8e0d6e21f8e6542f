package publish

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// mustGolden compares got with testdata/golden/<name>.md, or rewrites it with -update.
func mustGolden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("..", "..", "testdata", "golden", name+".md")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		tb.Errorf("%s differs from %s (run go test -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

var sampleTasks = []Task{
	{Title: "Reproduce the division by zero", Status: TaskDone},
	{Title: "Guard Divide against a zero divisor", Status: TaskInProgress},
	{Title: "Add a regression test", Status: TaskTodo},
}

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name string
		got  string
	}{
		{"tracking_queued", RenderStatus("job-1", Status{Phase: PhaseQueued})},
		{"tracking_running", RenderStatus("job-1", Status{
			Phase: PhaseRunning, Step: "Running `go test ./...`\n(iteration 7)", Tasks: sampleTasks,
			Elapsed: 95 * time.Second, Requester: "alice"})},
		{"tracking_not_isolated", RenderStatus("job-1", Status{
			Phase: PhasePreparing, Elapsed: 3 * time.Second, Requester: "alice", NotIsolated: true})},
		{"outcome_succeeded", RenderOutcome("job-1", Outcome{
			Kind: OutcomeSucceeded, PRNumber: 8, PRURL: "https://github.com/acme/calc/pull/8", PRCreated: true,
			Summary: "Divide now returns an error for a zero divisor; a test covers it.",
			Tasks:   []Task{{Title: "Fix", Status: TaskDone}}, Elapsed: 3*time.Minute + 12*time.Second, Requester: "alice"})},
		{"outcome_with_note", RenderOutcome("job-5", Outcome{
			Kind: OutcomeSucceeded, PRNumber: 9, PRURL: "https://github.com/acme/calc/pull/9", PRCreated: true,
			Summary: "Fixed.", Elapsed: time.Minute, Requester: "alice",
			Notes: []string{"This issue's title or description changed after I was asked.\nAsk me again to have me read it."}})},
		{"outcome_answered", RenderOutcome("job-2", Outcome{
			Kind: OutcomeSucceeded, Summary: "`Divide` is in `calc/calc.go`; it has no caller outside tests.",
			Elapsed: 20 * time.Second, Requester: "bob"})},
		{"outcome_failed_limit", RenderOutcome("job-3", Outcome{
			Kind: OutcomeFailed, Failure: "the agent did not finish: the tests still fail.",
			Limit: "stopped after 50 iterations (llm.max_iterations)", Mention: "@gohands", Branch: "gohands/issue-7",
			Tasks: sampleTasks, Elapsed: 14*time.Minute + 2*time.Second, Requester: "alice"})},
		{"outcome_cancelled", RenderOutcome("job-4", Outcome{
			Kind: OutcomeCancelled, CancelledBy: "carol", Mention: "@gohands", Branch: "gohands/issue-7",
			Elapsed: 2 * time.Hour, Requester: "alice", NotIsolated: true})},
		{"pr_body_issue", RenderPRBody(PRBody{
			JobID: "job-1", Summary: "Divide returned +Inf for a zero divisor. It now returns ErrDivideByZero.\n\nA table test covers the edge cases.",
			Fixes: 7,
			Changes: []FileChange{
				{Path: "calc/calc.go", Added: 5, Deleted: 1},
				{Path: "calc/calc_test.go", Added: 22, Status: "added"},
			},
			Tests:     []TestRun{{Command: "go test ./...", ExitCode: 0}, {Command: "go vet ./...", ExitCode: 1}},
			Cost:      Cost{Iterations: 12, PromptTokens: 48210, CompletionTokens: 3120, Wall: 151 * time.Second, Model: "gpt-4o"},
			Requester: "alice"})},
		{"pr_body_followup", RenderPRBody(PRBody{JobID: "job-9", Changes: []FileChange{{Path: "a|b.go", Added: 1, Deleted: 1}}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.got, "<!-- gohands:job=") {
				t.Error("rendering has no job marker")
			}
			mustGolden(t, tt.name, tt.got)
		})
	}
}

func TestRenderOutcomeFacts(t *testing.T) {
	// Facts a person relies on, checked apart from the golden layout.
	failed := RenderOutcome("j", Outcome{Kind: OutcomeFailed, Failure: "x", Limit: "stopped after 50 iterations (llm.max_iterations)", Branch: "gohands/b"})
	for _, want := range []string{"stopped after 50 iterations (llm.max_iterations)", "`@gohands <instructions>`", "`gohands/b`"} {
		if !strings.Contains(failed, want) {
			t.Errorf("failed outcome lacks %q:\n%s", want, failed)
		}
	}
	cancelled := RenderOutcome("j", Outcome{Kind: OutcomeCancelled, CancelledBy: "carol", Branch: "gohands/b"})
	if !strings.Contains(cancelled, "@carol") || !strings.Contains(cancelled, "stays on branch `gohands/b`") {
		t.Errorf("cancelled outcome:\n%s", cancelled)
	}
	if body := RenderPRBody(PRBody{JobID: "j", Fixes: 0}); strings.Contains(body, "Fixes") {
		t.Errorf("follow-up PR body closes an issue:\n%s", body)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{1400 * time.Millisecond, "1s"},
		{59 * time.Second, "59s"},
		{65 * time.Second, "1m 05s"},
		{time.Hour + 2*time.Minute + 30*time.Second, "1h 02m"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := thousands(1234567); got != "1,234,567" {
		t.Errorf("thousands = %q", got)
	}
}
