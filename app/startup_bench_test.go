package app

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner"
)

// addSampleRepo makes another copy of the sample repository with one issue.
func (h *harness) addSampleRepo(name string) (issue int, cloneURL string) {
	h.t.Helper()
	src := filepath.Join(h.w.dir, "sample")
	url, err := h.w.git.CreateRepoFromDir(sampleOwner, name, src, "main")
	if err != nil {
		h.t.Fatal(err)
	}
	h.w.gh.AddRepo(apptest.GitHubRepo{Owner: sampleOwner, Name: name, DefaultBranch: "main", CloneURL: url})
	if err := h.w.gh.SetPermission(sampleOwner, name, sampleUser, "write"); err != nil {
		h.t.Fatal(err)
	}
	n, err := h.w.gh.AddIssue(sampleOwner, name, apptest.GitHubIssue{Title: sampleTitle, Body: sampleBody, Author: sampleUser})
	if err != nil {
		h.t.Fatal(err)
	}
	return n, url
}

// labelRepo sends issues.labeled for issue n of repository name.
func (h *harness) labelRepo(name string, n int, delivery string) {
	h.t.Helper()
	ev := h.w.labeled(n, "gohands", sampleUser)
	ev.Repo.Name = github.String(name)
	ev.Repo.FullName = github.String(sampleOwner + "/" + name)
	if got := h.send("issues", delivery, ev); got != 202 {
		h.t.Fatalf("webhook status %d", got)
	}
}

// firstStep sends a label webhook and returns how long it took until the
// model got the job's first request; it waits for the job to end.
func (h *harness) firstStep(b *testing.B, name string, n int, delivery string) time.Duration {
	before := len(h.w.llm.Requests())
	t0 := time.Now()
	h.labelRepo(name, n, delivery)
	var at time.Time
	waitFor(b, "the first model request", func() bool {
		reqs := h.w.llm.Requests()
		if len(reqs) > before {
			at = reqs[before].At
			return true
		}
		return false
	})
	key := runner.Key{Owner: sampleOwner, Repo: name, Number: n}
	waitFor(b, "the job to end", func() bool {
		jobs, _ := h.app.Queue().Jobs(key)
		return len(jobs) > 0 && jobs[len(jobs)-1].State.Done()
	})
	return at.Sub(t0)
}

// BenchmarkFirstStep measures a labeled issue's webhook until the agent's
// first model request, with the Docker sandbox, for a repository gohands
// has never seen (cold) and one it has (warm: an incremental fetch), next
// to the floor of doing the same by hand: `git clone --depth 1` of the
// repository plus `docker run --rm IMAGE true`.
//
//	go test ./app -run '^$' -bench FirstStep -benchtime 10x
func BenchmarkFirstStep(b *testing.B) {
	h := mustHarness(b, withDocker(), withScript())
	report := func(b *testing.B, total time.Duration) {
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/first-request")
	}
	b.Run("floor-git-clone+docker-run", func(b *testing.B) {
		_, url := h.addSampleRepo(fmt.Sprintf("floor-%d", b.N))
		token := h.w.gh.InstallationToken()
		authURL := strings.Replace(url, "http://", "http://x-access-token:"+token+"@", 1)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			dst := filepath.Join(b.TempDir(), fmt.Sprint(i))
			t0 := time.Now()
			if out, err := exec.Command("git", "clone", "-q", "--depth", "1", authURL, dst).CombinedOutput(); err != nil {
				b.Fatalf("git clone: %v\n%s", err, out)
			}
			if out, err := exec.Command("docker", "run", "--rm", h.cfg.Sandbox.Image, "true").CombinedOutput(); err != nil {
				b.Fatalf("docker run: %v\n%s", err, out)
			}
			total += time.Since(t0)
			os.RemoveAll(dst)
		}
		report(b, total)
	})
	b.Run("cold", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("cold-%d-%d", b.N, i)
			n, _ := h.addSampleRepo(name)
			total += h.firstStep(b, name, n, "cold-"+name)
		}
		report(b, total)
	})
	b.Run("warm", func(b *testing.B) {
		name := fmt.Sprintf("warm-%d", b.N)
		n, _ := h.addSampleRepo(name)
		h.firstStep(b, name, n, name+"-prime")
		var total time.Duration
		for i := 0; i < b.N; i++ {
			// Someone pushes to main between jobs: the warm fetch has news.
			if _, err := h.w.git.PushCommit(sampleOwner, name, "main", map[string]string{"CHANGES": fmt.Sprint(i)}, "change"); err != nil {
				b.Fatal(err)
			}
			total += h.firstStep(b, name, n, fmt.Sprintf("%s-%d", name, i))
		}
		report(b, total)
	})
}

// BenchmarkJobMemory measures gohands' own heap per running job (sandbox
// excluded: the containers' memory is the engine's): jobs are started
// until each sits in a `sleep` inside its sandbox, then the live heap is
// compared with the idle server's. The emulator, git server and model run
// in the same process, so the figure is an upper bound.
//
//	go test ./app -run '^$' -bench JobMemory -benchtime 1x
func BenchmarkJobMemory(b *testing.B) {
	const jobs = 4
	sleep := apptest.LLMTool("terminal", map[string]any{"command": "sleep 5", "timeout": 30})
	steps := []apptest.LLMStep{sleep, sleep, sleep, sleep}
	h := mustHarness(b, withDocker(), withScript(steps...), func(h *harness) { h.cfg.Runner.Workers = jobs })
	for i := 0; i < b.N; i++ {
		var names []string
		for j := range jobs {
			name := fmt.Sprintf("mem-%d-%d", i, j)
			h.addSampleRepo(name)
			names = append(names, name)
		}
		idle := liveHeap()
		before := len(h.w.llm.Requests())
		for _, name := range names {
			h.labelRepo(name, 1, "mem-"+name)
		}
		waitFor(b, "every job in its sandbox", func() bool { return len(h.w.llm.Requests()) >= before+jobs })
		time.Sleep(300 * time.Millisecond) // the commands have started
		busy := liveHeap()
		b.ReportMetric(float64(int64(busy)-int64(idle))/jobs/(1<<20), "MB/job")
		for _, name := range names {
			key := runner.Key{Owner: sampleOwner, Repo: name, Number: 1}
			waitFor(b, "the job to end", func() bool {
				js, _ := h.app.Queue().Jobs(key)
				return len(js) > 0 && js[len(js)-1].State.Done()
			})
		}
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
