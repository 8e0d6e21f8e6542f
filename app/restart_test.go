package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"gopkg.in/yaml.v3"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/sandbox/sandboxtest"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// mustBinary builds cmd/gohands once per test run.
func mustBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gohands-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "gohands")
		out, err := exec.Command("go", "build", "-o", binaryPath, "../cmd/gohands").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// server is `gohands serve` as a separate process.
type server struct {
	cmd *exec.Cmd
	url string
	log *logSink
}

func startServer(t *testing.T, bin, configPath, url string) *server {
	t.Helper()
	s := &server{url: url, log: &logSink{}}
	s.cmd = exec.Command(bin, "serve", "-config", configPath, "-log-level", "debug")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("gohands serve (pid %d) log:\n%s", s.cmd.Process.Pid, s.log.String())
		}
	})
	waitFor(t, "gohands serve to answer /healthz", func() bool {
		resp, err := http.Get(url + HealthPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// TestKilledMidJobResumesFromBranch kills `gohands serve` with SIGKILL while
// the agent works; the next start reaps the orphaned container, runs the job
// again from the pushed branch, and there is still exactly one PR.
func TestKilledMidJobResumesFromBranch(t *testing.T) {
	image := sandboxtest.MustImage(t)
	bin := mustBinary(t)
	dir := t.TempDir()
	w, err := startWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	llm := apptest.NewLLM(t,
		fixGreeting,
		apptest.LLMTool("terminal", map[string]any{"command": "sleep 60", "timeout": 120}),
		finishWith("Fix the greeting (finished after a restart)."),
	)
	llm.SetVarFromRequest("WORKDIR", workDirInPrompt)
	cfg := w.config(filepath.Join(dir, "data"))
	cfg.LLM.BaseURL = llm.URL()
	cfg.Sandbox.Driver, cfg.Sandbox.Image = "docker", image
	cfg.Runner.PushInterval = time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.Address = ln.Addr().String()
	ln.Close()
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	url := "http://" + cfg.Server.Address

	first := startServer(t, bin, configPath, url)
	if status, err := w.webhook(context.Background(), url+WebhookPath, "issues", "d-kill", w.labeled(w.issue, "gohands", sampleUser)); err != nil || status != 202 {
		t.Fatalf("webhook: %d %v", status, err)
	}
	waitFor(t, "work in progress on the branch and the agent in its second step", func() bool {
		branches, _ := w.git.Branches(sampleOwner, sampleRepo)
		return slices.Contains(branches, "gohands/issue-1") && len(llm.Requests()) >= 2
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()

	cli := sandboxtest.MustDocker(t).Client()
	instance := instanceOf(cfg.Store.Path)
	containers := func() int {
		list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelInstance+"="+instance))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if containers() != 1 {
		t.Fatalf("want the killed job's container still there before the restart")
	}

	second := startServer(t, bin, configPath, url)
	waitFor(t, "the resumed job's pull request", func() bool {
		prs, _ := w.gh.PullRequests(sampleOwner, sampleRepo)
		return len(prs) > 0
	})
	waitFor(t, "the final tracking comment", func() bool {
		cs, _ := w.gh.Comments(sampleOwner, sampleRepo, w.issue)
		return len(cs) > 0 && strings.Contains(cs[len(cs)-1].Body, "finished after a restart")
	})
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("gohands serve after SIGTERM: %v", err)
	}

	prs, _ := w.gh.PullRequests(sampleOwner, sampleRepo)
	if len(prs) != 1 {
		t.Fatalf("%d pull requests, want exactly 1", len(prs))
	}
	if got, _ := w.git.FileAt(sampleOwner, sampleRepo, "gohands/issue-1", "greet.sh"); !strings.Contains(got, "Hello,") {
		t.Errorf("the branch lost the work pushed before the kill:\n%s", got)
	}
	reqs := llm.Requests()
	if len(reqs) < 3 || !strings.Contains(string(reqs[2].Body), "WIP: ") {
		t.Errorf("the resumed run's first request does not say what the branch holds")
	}
	if n := containers(); n != 0 {
		t.Errorf("%d containers of this gohands left after the restart", n)
	}
	cs, _ := w.gh.Comments(sampleOwner, sampleRepo, w.issue)
	if len(cs) != 1 {
		t.Errorf("%d tracking comments, want the one comment reused after the restart", len(cs))
	}
}
