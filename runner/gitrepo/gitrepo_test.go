package gitrepo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner/gitrepo"
)

var (
	bot       = gitrepo.Signature{Name: "gohands[bot]", Email: "123+gohands[bot]@users.noreply.github.com"}
	requester = gitrepo.Signature{Name: "Octo Cat", Email: "octocat@example.com"}
)

// fixture is a GitServer with the calc sample repository as acme/calc.
type fixture struct {
	srv   *apptest.GitServer
	url   string
	cache *gitrepo.Cache
}

func mustFixture(tb testing.TB) *fixture {
	tb.Helper()
	srv := apptest.NewGitServer(tb)
	url, err := srv.CreateRepoFromDir("acme", "calc", "../../testdata/repos/calc", "main")
	if err != nil {
		tb.Fatal(err)
	}
	return &fixture{srv: srv, url: url, cache: mustCache(tb)}
}

func mustCache(tb testing.TB) *gitrepo.Cache {
	tb.Helper()
	c, err := gitrepo.NewCache(filepath.Join(tb.TempDir(), "repos"))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func (f *fixture) opts(tb testing.TB, branch string) gitrepo.PrepareOptions {
	return gitrepo.PrepareOptions{CloneURL: f.url, Token: f.srv.Token, Branch: branch, BaseBranch: "main", Dir: filepath.Join(tb.TempDir(), "work")}
}

func mustPrepare(tb testing.TB, c *gitrepo.Cache, opts gitrepo.PrepareOptions) *gitrepo.Workspace {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := c.Prepare(ctx, opts)
	if err != nil {
		tb.Fatalf("Prepare(%s): %v", opts.Branch, err)
	}
	return ws
}

func mustCommit(tb testing.TB, ws *gitrepo.Workspace, msg string) string {
	tb.Helper()
	h, changed, err := ws.Commit(context.Background(), gitrepo.CommitOptions{Message: msg, Author: bot, CoAuthors: []gitrepo.Signature{requester}})
	if err != nil || !changed {
		tb.Fatalf("Commit(%q) = %s, %v, %v", msg, h, changed, err)
	}
	return h
}

func mustWrite(tb testing.TB, dir, name, content string) {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// gitCLI runs the real git in dir, with no user or system configuration.
func gitCLI(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(out.String())
}

// randomText is incompressible-ish text, so pack sizes mean something.
func randomText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed))
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%016x %016x\n", r.Uint64(), r.Uint64())
	}
	return b.String()
}

func TestPrepareColdThenWarm(t *testing.T) {
	f := mustFixture(t)
	if _, err := f.srv.PushCommit("acme", "calc", "main", map[string]string{"data/big.txt": randomText(1, 256<<10)}, "Add data"); err != nil {
		t.Fatal(err)
	}

	f.srv.ResetStats()
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-1"))
	cold := f.srv.Stats()
	if ws.Resumed || len(ws.BranchCommits) != 0 {
		t.Errorf("new branch reported as resumed: %+v", ws)
	}
	if got := gitCLI(t, ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"); got != "gohands/issue-1" {
		t.Errorf("HEAD = %s", got)
	}
	if got := gitCLI(t, ws.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("fresh working tree not clean:\n%s", got)
	}
	if got := gitCLI(t, ws.Dir, "remote", "get-url", "origin"); got != f.url {
		t.Errorf("origin = %s, want %s", got, f.url)
	}
	if got := gitCLI(t, ws.Dir, "log", "--format=%s", "origin/main"); got != "Add data\nInitial commit" {
		t.Errorf("git log origin/main = %q", got)
	}
	gitCLI(t, ws.Dir, "fsck", "--no-progress")
	if ws.HeadCommit() != ws.BaseCommit() || ws.HeadCommit() != gitCLI(t, ws.Dir, "rev-parse", "HEAD") {
		t.Errorf("head %s, base %s", ws.HeadCommit(), ws.BaseCommit())
	}

	// Someone merges a small change; the next job fetches only that.
	newHead, err := f.srv.PushCommit("acme", "calc", "main", map[string]string{"NEWS.md": "news\n"}, "Add news")
	if err != nil {
		t.Fatal(err)
	}
	f.srv.ResetStats()
	ws2 := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-2"))
	warm := f.srv.Stats()
	if ws2.BaseCommit() != newHead || ws2.HeadCommit() != newHead {
		t.Errorf("warm prepare at %s/%s, want %s", ws2.BaseCommit(), ws2.HeadCommit(), newHead)
	}
	if b, err := os.ReadFile(filepath.Join(ws2.Dir, "NEWS.md")); err != nil || string(b) != "news\n" {
		t.Errorf("NEWS.md = %q, %v", b, err)
	}
	t.Logf("upload-pack bytes: cold %d, warm %d", cold.UploadPackBytes, warm.UploadPackBytes)
	if cold.UploadPackBytes < 100<<10 {
		t.Errorf("cold fetch served %d bytes, want the whole repository (>100 KiB)", cold.UploadPackBytes)
	}
	if warm.UploadPackBytes*20 > cold.UploadPackBytes {
		t.Errorf("warm fetch served %d bytes, want far less than the cold %d", warm.UploadPackBytes, cold.UploadPackBytes)
	}

	// A third job with nothing new fetches no pack at all.
	f.srv.ResetStats()
	mustPrepare(t, f.cache, f.opts(t, "gohands/issue-3"))
	if st := f.srv.Stats(); st.UploadPackRequests != 0 {
		t.Errorf("up-to-date prepare made %d upload-pack requests", st.UploadPackRequests)
	}
}

func TestCommitPushResume(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-5"))

	// Nothing changed: no commit.
	h, changed, err := ws.Commit(ctx, gitrepo.CommitOptions{Message: "nothing", Author: bot})
	if err != nil || changed || h != ws.BaseCommit() {
		t.Fatalf("Commit on a clean tree = %s, %v, %v", h, changed, err)
	}

	// The agent fixes the bug, adds a script, a link, deletes a file,
	// makes one executable and leaves build output around.
	calc, err := os.ReadFile(filepath.Join(ws.Dir, "calc.go"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.Replace(string(calc), "func Sub(a, b int) int { return a + b }", "func Sub(a, b int) int { return a - b }", 1)
	if fixed == string(calc) {
		t.Fatal("calc.go does not have the expected bug")
	}
	mustWrite(t, ws.Dir, "calc.go", fixed)
	mustWrite(t, ws.Dir, "scripts/test.sh", "#!/bin/sh\ngo test ./...\n")
	if err := os.Chmod(filepath.Join(ws.Dir, "scripts/test.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("scripts/test.sh", filepath.Join(ws.Dir, "test")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws.Dir, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws.Dir, "go.mod"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, ws.Dir, "bin/calc", "ELF build output")
	mustWrite(t, ws.Dir, "cover.out", "coverage")

	hash, changed, err := ws.Commit(ctx, gitrepo.CommitOptions{
		Message:   "Fix Sub\n\nSub added instead of subtracting.",
		Author:    bot,
		CoAuthors: []gitrepo.Signature{requester, requester, bot},
	})
	if err != nil || !changed || hash != ws.HeadCommit() {
		t.Fatalf("Commit = %s, %v, %v (head %s)", hash, changed, err, ws.HeadCommit())
	}
	if got := gitCLI(t, ws.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("after commit, git status shows:\n%s", got)
	}
	if err := ws.Push(ctx, f.srv.Token); err != nil {
		t.Fatalf("Push: %v", err)
	}

	log, err := f.srv.Log("acme", "calc", "gohands/issue-5")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Hash != hash {
		t.Fatalf("remote log = %+v", log)
	}
	wantMsg := "Fix Sub\n\nSub added instead of subtracting.\n\nCo-authored-by: Octo Cat <octocat@example.com>"
	if log[0].Message != wantMsg || log[0].Author != bot.String() {
		t.Errorf("remote commit message = %q by %q, want %q by %q", log[0].Message, log[0].Author, wantMsg, bot)
	}
	repoDir, _ := f.srv.RepoDir("acme", "calc")
	tree := gitCLI(t, "", "--git-dir="+repoDir, "ls-tree", "-r", "gohands/issue-5")
	for _, want := range []string{"100755 blob", "\tscripts/test.sh", "120000 blob"} {
		if !strings.Contains(tree, want) {
			t.Errorf("remote tree lacks %q:\n%s", want, tree)
		}
	}
	for _, line := range strings.Split(tree, "\n") {
		if strings.HasSuffix(line, "\tgo.mod") && !strings.HasPrefix(line, "100755 ") {
			t.Errorf("go.mod mode change not committed: %s", line)
		}
	}
	for _, absent := range []string{"AGENTS.md", "bin/calc", "cover.out"} {
		if strings.Contains(tree, "\t"+absent+"\n") || strings.HasSuffix(tree, "\t"+absent) {
			t.Errorf("remote tree has %s:\n%s", absent, tree)
		}
	}
	if got, _ := f.srv.FileAt("acme", "calc", "gohands/issue-5", "test"); got != "scripts/test.sh" {
		t.Errorf("symlink target = %q", got)
	}

	changes, err := ws.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]gitrepo.FileChange{}
	for _, c := range changes {
		got[c.Path] = c
	}
	if c := got["calc.go"]; c.Action != "modified" || c.Added != 1 || c.Deleted != 1 {
		t.Errorf("calc.go change = %+v", c)
	}
	if c := got["AGENTS.md"]; c.Action != "deleted" || c.Deleted != 5 {
		t.Errorf("AGENTS.md change = %+v", c)
	}
	if c := got["scripts/test.sh"]; c.Action != "added" || c.Added != 2 {
		t.Errorf("scripts/test.sh change = %+v", c)
	}
	if c := got["go.mod"]; c.Action != "modified" || c.Added != 0 || c.Deleted != 0 {
		t.Errorf("go.mod change = %+v", c)
	}
	if len(changes) != 5 {
		t.Errorf("changes = %+v, want 5 files", changes)
	}

	// A follow-up job resumes from the branch.
	ws2 := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-5"))
	if !ws2.Resumed || ws2.HeadCommit() != hash {
		t.Fatalf("resume: Resumed=%v head %s, want %s", ws2.Resumed, ws2.HeadCommit(), hash)
	}
	if len(ws2.BranchCommits) != 1 || ws2.BranchCommits[0].Subject != "Fix Sub" || ws2.BranchCommits[0].Author != bot {
		t.Errorf("BranchCommits = %+v", ws2.BranchCommits)
	}
	if len(ws2.BranchChanges) != 5 {
		t.Errorf("BranchChanges = %+v", ws2.BranchChanges)
	}
	if b, _ := os.ReadFile(filepath.Join(ws2.Dir, "calc.go")); string(b) != fixed {
		t.Error("resumed working tree lacks the fix")
	}
	if fi, err := os.Lstat(filepath.Join(ws2.Dir, "test")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("resumed working tree: test is not a symlink: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(ws2.Dir, "scripts/test.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("resumed working tree: scripts/test.sh not executable: %v", err)
	}
	if got := gitCLI(t, ws2.Dir, "log", "--format=%s", "origin/main..HEAD"); got != "Fix Sub" {
		t.Errorf("git log origin/main..HEAD in resumed tree = %q", got)
	}
	if got := gitCLI(t, ws2.Dir, "rev-parse", "--abbrev-ref", "@{u}"); got != "origin/gohands/issue-5" {
		t.Errorf("upstream = %q", got)
	}
	mustWrite(t, ws2.Dir, "README.md", "# calc\n\nFixed.\n")
	second := mustCommit(t, ws2, "Update README")
	if err := ws2.Push(ctx, f.srv.Token); err != nil {
		t.Fatal(err)
	}
	if log, _ := f.srv.Log("acme", "calc", "gohands/issue-5"); len(log) != 3 || log[0].Hash != second {
		t.Errorf("remote log after follow-up = %+v", log)
	}
	gitCLI(t, "", "--git-dir="+repoDir, "fsck", "--no-progress")
	// Pushing again with nothing new is a no-op.
	f.srv.ResetStats()
	if err := ws2.Push(ctx, f.srv.Token); err != nil || f.srv.Stats().ReceivePackRequests != 0 {
		t.Errorf("second Push = %v, %d receive-pack requests", err, f.srv.Stats().ReceivePackRequests)
	}
}

func TestPushIntegratesForeignCommit(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-7"))
	mustWrite(t, ws.Dir, "calc.go", "package calc\n")
	mustCommit(t, ws, "Rewrite calc")
	if err := ws.Push(ctx, f.srv.Token); err != nil {
		t.Fatal(err)
	}
	// Another person pushes to the branch a change to other files.
	foreign, err := f.srv.PushCommit("acme", "calc", "gohands/issue-7", map[string]string{"docs/usage.md": "usage\n", "README.md": "readme\n"}, "Document usage")
	if err != nil {
		t.Fatal(err)
	}
	removed, err := f.srv.RemoveFiles("acme", "calc", "gohands/issue-7", []string{"AGENTS.md"}, "Drop AGENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, ws.Dir, "calc_test.go", "package calc\n")
	ours := mustCommit(t, ws, "Rewrite tests")
	if err := ws.Push(ctx, f.srv.Token); err != nil {
		t.Fatalf("Push after a foreign commit: %v", err)
	}
	log, err := f.srv.Log("acme", "calc", "gohands/issue-7")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(log[0].Subject, "Merge remote-tracking branch 'origin/gohands/issue-7'") || log[0].Author != bot.String() {
		t.Errorf("remote head = %+v, want a merge by the bot", log[0])
	}
	hashes := map[string]bool{}
	for _, c := range log {
		hashes[c.Hash] = true
	}
	if !hashes[foreign] || !hashes[ours] || !hashes[removed] {
		t.Errorf("remote log %+v lacks the foreign %s or our %s commit", log, foreign, ours)
	}
	for p, want := range map[string]string{"docs/usage.md": "usage\n", "README.md": "readme\n", "calc_test.go": "package calc\n", "calc.go": "package calc\n"} {
		if got, err := f.srv.FileAt("acme", "calc", "gohands/issue-7", p); err != nil || got != want {
			t.Errorf("remote %s = %q, %v; want %q", p, got, err, want)
		}
		if b, err := os.ReadFile(filepath.Join(ws.Dir, p)); err != nil || string(b) != want {
			t.Errorf("working tree %s = %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := f.srv.FileAt("acme", "calc", "gohands/issue-7", "AGENTS.md"); err == nil {
		t.Error("the other person's deletion of AGENTS.md was undone on the remote")
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, "AGENTS.md")); !os.IsNotExist(err) {
		t.Errorf("AGENTS.md still in the working tree after the merge: %v", err)
	}
	gitCLI(t, ws.Dir, "fsck", "--no-progress")
	repoDir, _ := f.srv.RepoDir("acme", "calc")
	gitCLI(t, "", "--git-dir="+repoDir, "fsck", "--no-progress")
	if got := gitCLI(t, ws.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("working tree not clean after merge:\n%s", got)
	}
}

func TestPushStopsOnConflictingForeignCommit(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-8"))
	mustWrite(t, ws.Dir, "calc.go", "package calc // ours\n")
	mustCommit(t, ws, "Ours")
	// Someone creates the branch first, changing the same file.
	foreign, err := f.srv.PushCommit("acme", "calc", "gohands/issue-8", map[string]string{"calc.go": "package calc // theirs\n"}, "Theirs")
	if err != nil {
		t.Fatal(err)
	}
	err = ws.Push(ctx, f.srv.Token)
	if !errors.Is(err, gitrepo.ErrBranchMoved) {
		t.Fatalf("Push = %v, want ErrBranchMoved", err)
	}
	var moved *gitrepo.BranchMovedError
	if !errors.As(err, &moved) || moved.Branch != "gohands/issue-8" || len(moved.Foreign) != 1 || moved.Foreign[0].Hash != foreign ||
		strings.Join(moved.Conflicts, ",") != "calc.go" {
		t.Errorf("error = %#v", moved)
	}
	for _, want := range []string{"gohands/issue-8", "Theirs", "calc.go", foreign[:7]} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	log, _ := f.srv.Log("acme", "calc", "gohands/issue-8")
	if len(log) == 0 || log[0].Hash != foreign {
		t.Errorf("remote head = %+v, want the other person's %s untouched", log, foreign)
	}
}

func TestTokenNeverOnDisk(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-9"))
	mustWrite(t, ws.Dir, "x.txt", "x\n")
	mustCommit(t, ws, "x")
	if err := ws.Push(ctx, f.srv.Token); err != nil {
		t.Fatal(err)
	}
	ws2 := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-9"))
	for _, root := range []string{f.cache.Dir(), ws.Dir, ws2.Dir} {
		n := 0
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n++
			if bytes.Contains(b, []byte(f.srv.Token)) {
				t.Errorf("token found in %s", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 5 {
			t.Errorf("only %d files under %s: the walk checked nothing", n, root)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(ws.Dir, ".git", "config"))
	if err != nil || !strings.Contains(string(cfg), f.url) {
		t.Errorf(".git/config lacks the clean origin URL: %s, %v", cfg, err)
	}
}

func TestConcurrentPrepares(t *testing.T) {
	f := mustFixture(t)
	const jobs = 4
	var wg sync.WaitGroup
	errs := make([]error, jobs)
	wss := make([]*gitrepo.Workspace, jobs)
	// A second Cache on the same directory stands for a second process:
	// only the file lock keeps the two apart.
	other, err := gitrepo.NewCache(f.cache.Dir())
	if err != nil {
		t.Fatal(err)
	}
	caches := []*gitrepo.Cache{f.cache, other}
	for i := range jobs {
		opts := f.opts(t, fmt.Sprintf("gohands/issue-%d", 100+i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			wss[i], errs[i] = caches[i%2].Prepare(context.Background(), opts)
			if errs[i] != nil {
				return
			}
			if err := os.WriteFile(filepath.Join(wss[i].Dir, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o644); err != nil {
				errs[i] = err
				return
			}
			if _, _, err := wss[i].Commit(context.Background(), gitrepo.CommitOptions{Message: "job", Author: bot}); err != nil {
				errs[i] = err
				return
			}
			errs[i] = wss[i].Push(context.Background(), f.srv.Token)
		}()
		// Someone keeps pushing to main meanwhile.
		if _, err := f.srv.PushCommit("acme", "calc", "main", map[string]string{fmt.Sprintf("m%d.txt", i): "m"}, "main moves"); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		gitCLI(t, wss[i].Dir, "fsck", "--no-progress")
	}
	branches, _ := f.srv.Branches("acme", "calc")
	if len(branches) != jobs+1 {
		t.Errorf("remote branches = %v", branches)
	}
	mirrors, _ := filepath.Glob(filepath.Join(f.cache.Dir(), "*", "acme", "calc.git"))
	if len(mirrors) != 1 {
		t.Fatalf("mirrors = %v", mirrors)
	}
	gitCLI(t, "", "--git-dir="+mirrors[0], "fsck", "--no-progress")
}

func TestPrepareErrors(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	nonEmpty := t.TempDir()
	mustWrite(t, nonEmpty, "x", "x")
	tests := []struct {
		name    string
		edit    func(*gitrepo.PrepareOptions)
		wantErr []string
	}{
		{"wrong token", func(o *gitrepo.PrepareOptions) { o.Token = "ghs_wrong" }, []string{f.url, "authentication"}},
		{"no token", func(o *gitrepo.PrepareOptions) { o.Token = "" }, []string{f.url}},
		{"missing repository", func(o *gitrepo.PrepareOptions) { o.CloneURL = f.srv.CloneURL("acme", "nope") }, []string{f.srv.CloneURL("acme", "nope")}},
		{"unreachable host", func(o *gitrepo.PrepareOptions) { o.CloneURL = "http://127.0.0.1:1/acme/calc.git" }, []string{"http://127.0.0.1:1/acme/calc.git"}},
		{"credentials in URL", func(o *gitrepo.PrepareOptions) {
			o.CloneURL = strings.Replace(f.url, "http://", "http://x-access-token:"+f.srv.Token+"@", 1)
		}, []string{"must not carry credentials"}},
		{"missing base branch", func(o *gitrepo.PrepareOptions) { o.BaseBranch = "develop" }, []string{`base branch "develop" not found`, f.url}},
		{"bad branch", func(o *gitrepo.PrepareOptions) { o.Branch = "../../etc" }, []string{"invalid branch name"}},
		{"non-empty dir", func(o *gitrepo.PrepareOptions) { o.Dir = nonEmpty }, []string{"not empty"}},
		{"empty dir", func(o *gitrepo.PrepareOptions) { o.Dir = "" }, []string{"empty working tree directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := f.opts(t, "gohands/issue-1")
			tt.edit(&opts)
			ws, err := f.cache.Prepare(ctx, opts)
			if err == nil {
				t.Fatalf("Prepare succeeded: %+v", ws)
			}
			t.Logf("error: %v", err)
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), f.srv.Token) {
				t.Errorf("error leaks the token: %v", err)
			}
			if opts.Dir != nonEmpty && opts.Dir != "" {
				if entries, _ := os.ReadDir(opts.Dir); len(entries) != 0 {
					t.Errorf("failed Prepare left %d entries in %s", len(entries), opts.Dir)
				}
			}
		})
	}
	if m, _ := filepath.Glob(filepath.Join(f.cache.Dir(), "*", "acme", "nope.git")); len(m) != 0 {
		t.Errorf("a failed first fetch left a mirror: %v", m)
	}
	// A failed push names the URL, not the token.
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-2"))
	mustWrite(t, ws.Dir, "x", "x")
	mustCommit(t, ws, "x")
	err := ws.Push(ctx, "ghs_wrong")
	if err == nil || !strings.Contains(err.Error(), f.url) || strings.Contains(err.Error(), f.srv.Token) {
		t.Errorf("Push with a bad token = %v", err)
	}
	if _, _, err := ws.Commit(ctx, gitrepo.CommitOptions{Message: " ", Author: bot}); err == nil {
		t.Error("Commit with an empty message succeeded")
	}
	if _, _, err := ws.Commit(ctx, gitrepo.CommitOptions{Message: "m"}); err == nil {
		t.Error("Commit without an author succeeded")
	}
}

func TestMirrorRepackedAfterMaxPacks(t *testing.T) {
	f := mustFixture(t)
	f.cache.MaxPacks = 2
	packs := func() int {
		m, _ := filepath.Glob(filepath.Join(f.cache.Dir(), "*", "acme", "calc.git", "objects", "pack", "*.pack"))
		return len(m)
	}
	var last *gitrepo.Workspace
	for i := range 4 {
		if _, err := f.srv.PushCommit("acme", "calc", "main", map[string]string{fmt.Sprintf("f%d", i): "x"}, "more"); err != nil {
			t.Fatal(err)
		}
		last = mustPrepare(t, f.cache, f.opts(t, "b"))
		if n := packs(); n > 3 {
			t.Fatalf("after %d fetches the mirror has %d packs, want at most 3", i+1, n)
		}
	}
	gitCLI(t, last.Dir, "fsck", "--no-progress")
	if b, err := os.ReadFile(filepath.Join(last.Dir, "f3")); err != nil || string(b) != "x" {
		t.Errorf("f3 = %q, %v", b, err)
	}
}

func TestPushWithNothingNewFollowsForeignCommits(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	ws := mustPrepare(t, f.cache, f.opts(t, "gohands/issue-11"))
	mustWrite(t, ws.Dir, "a.txt", "a\n")
	mustCommit(t, ws, "a")
	if err := ws.Push(ctx, f.srv.Token); err != nil {
		t.Fatal(err)
	}
	foreign, err := f.srv.PushCommit("acme", "calc", "gohands/issue-11", map[string]string{"a.txt": "theirs\n"}, "Theirs")
	if err != nil {
		t.Fatal(err)
	}
	// The job made no new commit: Push catches up instead of failing or
	// reporting a conflict on a.txt, which only the other person changed since.
	if err := ws.Push(ctx, f.srv.Token); err != nil {
		t.Fatalf("Push = %v", err)
	}
	if ws.HeadCommit() != foreign {
		t.Errorf("head = %s, want the other person's %s", ws.HeadCommit(), foreign)
	}
	if b, _ := os.ReadFile(filepath.Join(ws.Dir, "a.txt")); string(b) != "theirs\n" {
		t.Errorf("a.txt = %q", b)
	}
}
