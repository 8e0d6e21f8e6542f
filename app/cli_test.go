package app

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gohands/gohands/sandbox/sandboxtest"
)

// TestDemoCommand runs `gohands demo` as a newcomer would and checks that it
// prints the pull request it opened and the expected diff.
func TestDemoCommand(t *testing.T) {
	sandboxtest.MustDocker(t) // the demo uses Docker when it answers; CI must have it
	bin := mustBinary(t)
	cmd := exec.Command(bin, "demo")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("gohands demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"sandbox  docker",
		"REPLAY of a recorded conversation",
		"Pull request #2: greet.sh misspells Hello",
		"gohands/issue-1 → main",
		"Fixes #1",
		`-echo "Helo, $name!"`,
		`+echo "Hello, $name!"`,
		"job ", "succeeded",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old mode") {
		t.Errorf("the demo's change altered a file mode:\n%s", s)
	}
}

// TestActionCommand runs `gohands action` as a GitHub Actions step would:
// an issues.labeled event file, GITHUB_TOKEN and the API URL pointing at
// the emulator, and a git remote; it must open the PR and exit 0.
func TestActionCommand(t *testing.T) {
	bin := mustBinary(t)
	dir := t.TempDir()
	w, err := startWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	event, err := json.Marshal(w.labeled(w.issue, "gohands", sampleUser))
	if err != nil {
		t.Fatal(err)
	}
	eventPath := filepath.Join(dir, "event.json")
	if err := os.WriteFile(eventPath, event, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"llm":     map[string]any{"base_url": w.llm.URL(), "model": "replay", "api_key": "k"},
		"sandbox": map[string]any{"driver": "process"},
		"store":   map[string]any{"path": filepath.Join(dir, "data")},
	}
	data, _ := yaml.Marshal(cfg)
	configPath := filepath.Join(dir, "gohands.yml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	outputs, summary := filepath.Join(dir, "outputs"), filepath.Join(dir, "summary.md")
	cmd := exec.Command(bin, "action", "-config", configPath)
	cmd.Env = append(os.Environ(),
		"GITHUB_OUTPUT="+outputs,
		"GITHUB_STEP_SUMMARY="+summary,
		"GITHUB_EVENT_NAME=issues",
		"GITHUB_EVENT_PATH="+eventPath,
		"GITHUB_TOKEN="+w.gh.ActionsToken,
		"GITHUB_REPOSITORY="+sampleOwner+"/"+sampleRepo,
		"GITHUB_API_URL="+w.gh.URL,
		"GITHUB_SERVER_URL="+w.gh.URL,
		"GITHUB_RUN_ID=42",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gohands action: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "succeeded (pull request #2)") {
		t.Errorf("output:\n%s", out)
	}
	prs, _ := w.gh.PullRequests(sampleOwner, sampleRepo)
	if len(prs) != 1 || prs[0].Head != "gohands/issue-1" || !strings.Contains(prs[0].Body, "Fixes #1") {
		t.Fatalf("pull requests: %+v", prs)
	}
	if got, _ := w.git.FileAt(sampleOwner, sampleRepo, "gohands/issue-1", "greet.sh"); !strings.Contains(got, "Hello,") {
		t.Errorf("branch greet.sh:\n%s", got)
	}
	if strings.Contains(string(out), w.gh.ActionsToken) {
		t.Errorf("the token appears in the output")
	}
	// Later steps get the outcome as outputs; the run's page as a summary.
	got, _ := os.ReadFile(outputs)
	for _, want := range []string{"state=succeeded\n", "pull_request=2\n", "pull_request_url=" + w.gh.URL + "/octo-org/greet/pull/2\n", "job_id=2", "reason=\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("GITHUB_OUTPUT lacks %q:\n%s", want, got)
		}
	}
	got, _ = os.ReadFile(summary)
	if !strings.Contains(string(got), "### ✅ gohands") || !strings.Contains(string(got), "pull request [#2]("+w.gh.URL+"/octo-org/greet/pull/2)") {
		t.Errorf("GITHUB_STEP_SUMMARY:\n%s", got)
	}

	// An event that asks for nothing ends at once with exit code 0.
	cmd = exec.Command(bin, "action", "-config", configPath)
	os.Remove(outputs)
	cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+outputs, "GITHUB_EVENT_NAME=push", "GITHUB_EVENT_PATH="+eventPath,
		"GITHUB_TOKEN="+w.gh.ActionsToken, "GITHUB_REPOSITORY=octo-org/greet", "GITHUB_API_URL="+w.gh.URL)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "nothing to do") {
		t.Errorf("push event: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(outputs); !strings.HasPrefix(string(got), "state=skipped\njob_id=\n") {
		t.Errorf("GITHUB_OUTPUT after a push event:\n%s", got)
	}

	// Outside Actions it says what is missing.
	cmd = exec.Command(bin, "action")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "GITHUB_EVENT_NAME") {
		t.Errorf("without the environment: %v\n%s", err, out)
	}
}

// TestDemoWithoutDocker: on a machine where no Docker engine answers, the
// demo still runs, in the process sandbox, and says so.
func TestDemoWithoutDocker(t *testing.T) {
	bin := mustBinary(t)
	cmd := exec.Command(bin, "demo")
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gohands demo without Docker: %v\n%s", err, out)
	}
	for _, want := range []string{"sandbox  process — WARNING: NO isolation", "Pull request #2", `+echo "Hello, $name!"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestActionOutputSpansLines checks that a value over several lines, even
// one holding the usual delimiter, reads back as one output.
func TestActionOutputSpansLines(t *testing.T) {
	var b strings.Builder
	writeOutput(&b, "state", "failed")
	writeOutput(&b, "reason", "the model failed\ngohands_EOF\nstate=succeeded")
	want := "state=failed\nreason<<gohands_EOF_\nthe model failed\ngohands_EOF\nstate=succeeded\ngohands_EOF_\n"
	if b.String() != want {
		t.Errorf("outputs:\n%s\nwant:\n%s", b.String(), want)
	}
}
