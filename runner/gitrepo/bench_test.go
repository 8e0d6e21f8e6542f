package gitrepo_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner/gitrepo"
)

// largeRoot holds the generated large repository (bench/large.git), made
// once and kept across runs because generating it takes a while.
const largeRoot = "/tmp/gohands-bench-repos"

const (
	largeCommits = 5000
	largeFiles   = 2000
)

// BenchmarkPrepareSample compares Prepare of testdata/repos/calc, cold and
// warm, with `git clone --depth 1` by the git CLI.
func BenchmarkPrepareSample(b *testing.B) {
	f := mustFixture(b)
	benchPrepare(b, f.srv, f.url)
}

// BenchmarkPrepareLarge is BenchmarkPrepareSample on a generated repository
// of 5,000 commits over 2,000 files.
func BenchmarkPrepareLarge(b *testing.B) {
	srv := mustLargeServer(b)
	benchPrepare(b, srv, srv.CloneURL("bench", "large"))
}

func benchPrepare(b *testing.B, srv *apptest.GitServer, url string) {
	ctx := context.Background()
	owner, name := ownerName(url)
	opts := func(b *testing.B, dir string) gitrepo.PrepareOptions {
		return gitrepo.PrepareOptions{CloneURL: url, Token: srv.Token, Branch: "gohands/bench", BaseBranch: "main", Dir: dir}
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		tmp := b.TempDir()
		for i := 0; b.Loop(); i++ {
			c, err := gitrepo.NewCache(filepath.Join(tmp, fmt.Sprint("cache", i)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Prepare(ctx, opts(b, filepath.Join(tmp, fmt.Sprint("work", i)))); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(filepath.Join(tmp, fmt.Sprint("cache", i)))
			os.RemoveAll(filepath.Join(tmp, fmt.Sprint("work", i)))
			b.StartTimer()
		}
	})
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		tmp := b.TempDir()
		c := mustCache(b)
		mustPrepare(b, c, opts(b, filepath.Join(tmp, "first")))
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			if _, err := srv.PushCommit(owner, name, "main", map[string]string{fmt.Sprintf("bench/%d.txt", i): randomText(uint64(i), 1000)}, "bench commit"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := c.Prepare(ctx, opts(b, filepath.Join(tmp, fmt.Sprint("work", i)))); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(filepath.Join(tmp, fmt.Sprint("work", i)))
			b.StartTimer()
		}
	})
	b.Run("git-clone-depth1", func(b *testing.B) {
		tmp := b.TempDir()
		authURL := strings.Replace(url, "http://", "http://"+gitrepo.TokenUser+":"+srv.Token+"@", 1)
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(tmp, fmt.Sprint("clone", i))
			cmd := exec.Command("git", "clone", "--quiet", "--depth", "1", "--branch", "main", authURL, dir)
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git clone: %v: %s", err, out)
			}
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
}

// BenchmarkPeakHeap reports the peak Go heap above the baseline (peak-heap-B)
// of one job's git work: a warm Prepare plus a Commit of the sample
// repository, and cold and warm Prepares of the large one.
func BenchmarkPeakHeap(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, setup func(i int), job func(i int)) {
		b.ReportAllocs()
		var peak uint64
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			setup(i)
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			baseline := ms.HeapAlloc
			stop := samplePeakHeap()
			b.StartTimer()
			job(i)
			b.StopTimer()
			if p := stop(); p > baseline && p-baseline > peak {
				peak = p - baseline
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(peak), "peak-heap-B")
	}
	b.Run("sample-prepare-commit", func(b *testing.B) {
		f := mustFixture(b)
		tmp := b.TempDir()
		mustPrepare(b, f.cache, f.opts(b, "warmup"))
		run(b, func(int) {}, func(i int) {
			ws, err := f.cache.Prepare(ctx, gitrepo.PrepareOptions{CloneURL: f.url, Token: f.srv.Token, Branch: fmt.Sprint("gohands/issue-", i), BaseBranch: "main", Dir: filepath.Join(tmp, fmt.Sprint("work", i))})
			if err != nil {
				b.Fatal(err)
			}
			mustWrite(b, ws.Dir, "calc.go", "package calc\n")
			if _, _, err := ws.Commit(ctx, gitrepo.CommitOptions{Message: "m", Author: bot}); err != nil {
				b.Fatal(err)
			}
		})
	})
	srv := mustLargeServer(b)
	url := srv.CloneURL("bench", "large")
	prepare := func(b *testing.B, c *gitrepo.Cache, dir string) {
		if _, err := c.Prepare(ctx, gitrepo.PrepareOptions{CloneURL: url, Token: srv.Token, Branch: "gohands/bench", BaseBranch: "main", Dir: dir}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("large-cold", func(b *testing.B) {
		tmp := b.TempDir()
		run(b, func(int) {}, func(i int) {
			c, err := gitrepo.NewCache(filepath.Join(tmp, fmt.Sprint("cache", i)))
			if err != nil {
				b.Fatal(err)
			}
			prepare(b, c, filepath.Join(tmp, fmt.Sprint("work", i)))
		})
	})
	b.Run("large-warm", func(b *testing.B) {
		tmp := b.TempDir()
		c := mustCache(b)
		prepare(b, c, filepath.Join(tmp, "first"))
		run(b, func(i int) {
			if _, err := srv.PushCommit("bench", "large", "main", map[string]string{fmt.Sprintf("bench/%d.txt", i): "x"}, "bench"); err != nil {
				b.Fatal(err)
			}
		}, func(i int) { prepare(b, c, filepath.Join(tmp, fmt.Sprint("work", i))) })
	})
}

// samplePeakHeap polls the heap until the returned function is called,
// which returns the highest HeapAlloc seen.
func samplePeakHeap() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

func ownerName(url string) (string, string) {
	parts := strings.Split(strings.TrimSuffix(url, ".git"), "/")
	return parts[len(parts)-2], parts[len(parts)-1]
}

// mustLargeServer serves a copy of largeRoot, generating bench/large.git
// first if needed.
func mustLargeServer(tb testing.TB) *apptest.GitServer {
	tb.Helper()
	repo := filepath.Join(largeRoot, "bench", "large.git")
	if _, err := os.Stat(filepath.Join(repo, "refs", "heads", "main")); err != nil {
		if _, err := os.Stat(filepath.Join(repo, "packed-refs")); err != nil {
			if err := makeLargeRepo(repo); err != nil {
				tb.Fatal(err)
			}
		}
	}
	// Serve a copy, so that the commits benchmarks push do not pile up in it.
	root := tb.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(largeRoot, "bench"), root).CombinedOutput(); err != nil {
		tb.Fatalf("copy %s: %v: %s", largeRoot, err, out)
	}
	srv, err := apptest.StartGitServer(root, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	return srv
}

// makeLargeRepo writes a bare repository of largeCommits commits over
// largeFiles files with git fast-import, into a temporary directory renamed
// into place at the end.
func makeLargeRepo(repo string) error {
	if err := os.MkdirAll(filepath.Dir(repo), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(repo), "tmp-large-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	run := func(stdin io.Reader, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Env, cmd.Dir, cmd.Stdin = env, tmp, stdin
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(nil, "init", "--quiet", "--bare", "--initial-branch=main", "."); err != nil {
		return err
	}
	if err := run(nil, "config", "http.receivepack", "true"); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriter(pw)
		file := func(n, version int) string {
			var s strings.Builder
			fmt.Fprintf(&s, "package p%02d\n\n// File %d, version %d.\n", n%40, n, version)
			for l := range 40 {
				fmt.Fprintf(&s, "func F%d_%d() int { return %d }\n", n, l, (n*7919+l*31+version)%100003)
			}
			return s.String()
		}
		data := func(s string) { fmt.Fprintf(w, "data %d\n%s\n", len(s), s) }
		when := int64(1_600_000_000)
		for c := range largeCommits {
			fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter Bench <bench@example.com> %d +0000\n", c+1, when+int64(c)*60)
			data(fmt.Sprintf("Commit %d", c))
			if c > 0 {
				fmt.Fprintf(w, "from :%d\n", c)
			}
			if c == 0 {
				for n := range largeFiles {
					fmt.Fprintf(w, "M 100644 inline dir%02d/file%04d.go\n", n%40, n)
					data(file(n, 0))
				}
			} else {
				for k := range 3 {
					n := (c*37 + k*613) % largeFiles
					fmt.Fprintf(w, "M 100644 inline dir%02d/file%04d.go\n", n%40, n)
					data(file(n, c))
				}
			}
			w.WriteString("\n")
		}
		pw.CloseWithError(w.Flush())
	}()
	if err := run(pr, "fast-import", "--quiet"); err != nil {
		return err
	}
	if err := run(nil, "repack", "-adq"); err != nil {
		return err
	}
	return os.Rename(tmp, repo)
}

// BenchmarkWorktreeFromMirror compares ways of making a working tree from an
// up-to-date mirror of the large repository: Prepare (hard-linked packs plus
// checkout; the fetch finds nothing new) against go-git cloning the mirror
// through its file transport, which re-packs every object.
func BenchmarkWorktreeFromMirror(b *testing.B) {
	srv := mustLargeServer(b)
	url := srv.CloneURL("bench", "large")
	c := mustCache(b)
	tmp := b.TempDir()
	opts := func(dir string) gitrepo.PrepareOptions {
		return gitrepo.PrepareOptions{CloneURL: url, Token: srv.Token, Branch: "gohands/bench", BaseBranch: "main", Dir: dir}
	}
	mustPrepare(b, c, opts(filepath.Join(tmp, "first")))
	mirrors, _ := filepath.Glob(filepath.Join(c.Dir(), "*", "bench", "large.git"))
	if len(mirrors) != 1 {
		b.Fatalf("mirrors: %v", mirrors)
	}
	b.Run("prepare-hardlink", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(tmp, fmt.Sprint("h", i))
			if _, err := c.Prepare(context.Background(), opts(dir)); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
	b.Run("gogit-clone-mirror", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(tmp, fmt.Sprint("c", i))
			if _, err := git.PlainCloneContext(context.Background(), dir, false, &git.CloneOptions{URL: mirrors[0], ReferenceName: "refs/heads/main", SingleBranch: true, Tags: git.NoTags}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
}

// BenchmarkCommitPushLarge measures a one-file Commit and Push on the large
// repository: go-git walks the history of the remote's refs to find what to
// send.
func BenchmarkCommitPushLarge(b *testing.B) {
	srv := mustLargeServer(b)
	c := mustCache(b)
	ws := mustPrepare(b, c, gitrepo.PrepareOptions{CloneURL: srv.CloneURL("bench", "large"), Token: srv.Token, Branch: "gohands/bench", BaseBranch: "main", Dir: filepath.Join(b.TempDir(), "w")})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		mustWrite(b, ws.Dir, "dir00/file0000.go", randomText(uint64(i), 2000))
		if _, _, err := ws.Commit(ctx, gitrepo.CommitOptions{Message: "bench", Author: bot}); err != nil {
			b.Fatal(err)
		}
		if err := ws.Push(ctx, srv.Token); err != nil {
			b.Fatal(err)
		}
	}
}
