package agent

import (
	"context"
	"encoding/json"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/gohands/gohands/app/apptest"
)

// TestReplayRecordedScript runs the recorded conversation the offline demo
// uses, and checks that the job's assistant events replay it exactly: an
// assistant Event decodes as an apptest.LLMStep.
func TestReplayRecordedScript(t *testing.T) {
	steps, err := apptest.LoadLLMScript("../../testdata/llm/fix-typo.json")
	if err != nil {
		t.Fatal(err)
	}
	sb := mustSandbox(t, nil)
	readme := path.Join(sb.WorkDir(), "README.md")
	if err := sb.WriteFile(context.Background(), readme, []byte("# Calc\n\nAdd teh numbers.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	llm := apptest.NewLLM(t, steps...)
	llm.SetVar("WORKDIR", sb.WorkDir())
	res, log := mustRun(t, testConfig(llm), sb, Task{User: "Fix the typo in the README."}, Hooks{})
	if !res.Finished || !strings.Contains(res.Message, "Fixed the typo") {
		t.Fatalf("result = %+v", res)
	}
	if got, _ := sb.ReadFile(context.Background(), readme); string(got) != "# Calc\n\nAdd the numbers.\n" {
		t.Fatalf("README = %q", got)
	}
	if obs := lastToolResult(t, llm); !strings.Contains(obs, "no typo left") {
		t.Fatalf("last observation = %q", obs)
	}

	// Replay: the assistant events, decoded as steps, drive a second run to
	// the same requests.
	var replay []apptest.LLMStep
	for _, e := range log.kind(EventAssistant) {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var st apptest.LLMStep
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		replay = append(replay, st)
	}
	if len(replay) != len(steps) {
		t.Fatalf("%d assistant events, want %d", len(replay), len(steps))
	}
	sb2 := mustSandbox(t, nil)
	if err := sb2.WriteFile(context.Background(), path.Join(sb2.WorkDir(), "README.md"), []byte("# Calc\n\nAdd teh numbers.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range replay { // the first run's paths, rebased on the second sandbox
		for j := range replay[i].ToolCalls {
			replay[i].ToolCalls[j].Arguments = strings.ReplaceAll(replay[i].ToolCalls[j].Arguments, sb.WorkDir(), sb2.WorkDir())
		}
	}
	llm2 := apptest.NewLLM(t, replay...)
	res2, _ := mustRun(t, testConfig(llm2), sb2, Task{User: "Fix the typo in the README."}, Hooks{})
	if res2.Message != res.Message || res2.Iterations != res.Iterations {
		t.Fatalf("replay = %+v, want %+v", res2, res)
	}
	a, b := toolResults(llm.Requests()[len(steps)-1]), toolResults(llm2.Requests()[len(steps)-1])
	for i := range a {
		a[i] = strings.ReplaceAll(a[i], sb.WorkDir(), "W")
		b[i] = strings.ReplaceAll(b[i], sb2.WorkDir(), "W")
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("replayed observations differ:\n%q\n%q", a, b)
	}
}
