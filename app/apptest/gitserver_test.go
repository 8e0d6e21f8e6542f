package apptest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mustGit runs the git CLI in dir with an isolated configuration.
func mustGit(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := runGit(dir, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func runGit(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", &gitError{args: args, err: err, stderr: stderr.String()}
	}
	return out.String(), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return "git " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + e.stderr
}

func authURL(s *GitServer, owner, name string) string {
	return strings.Replace(s.CloneURL(owner, name), "http://", "http://"+GitTokenUser+":"+s.Token+"@", 1)
}

func TestGitServerCloneAndPush(t *testing.T) {
	s := NewGitServer(t)
	url, err := s.CreateRepoFromDir("acme", "calc", "../../testdata/repos/calc", "main")
	if err != nil {
		t.Fatal(err)
	}
	if url != s.URL+"/acme/calc.git" {
		t.Errorf("clone URL = %q", url)
	}
	dir := filepath.Join(t.TempDir(), "calc")
	mustGit(t, "", "clone", "--quiet", authURL(s, "acme", "calc"), dir)
	if _, err := os.Stat(filepath.Join(dir, "calc.go")); err != nil {
		t.Fatalf("clone lacks calc.go: %v", err)
	}
	st := s.Stats()
	if st.UploadPackRequests == 0 || st.UploadPackBytes == 0 {
		t.Errorf("stats after clone = %+v, want upload-pack counted", st)
	}

	if err := os.WriteFile(filepath.Join(dir, "NEW.md"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, dir, "checkout", "--quiet", "-b", "feature")
	mustGit(t, dir, "add", "NEW.md")
	mustGit(t, dir, "commit", "--quiet", "-m", "Add NEW")
	mustGit(t, dir, "push", "--quiet", "origin", "feature")
	if s.Stats().ReceivePackRequests != 1 {
		t.Errorf("receive-pack requests = %d, want 1", s.Stats().ReceivePackRequests)
	}

	branches, err := s.Branches("acme", "calc")
	if err != nil || strings.Join(branches, ",") != "feature,main" {
		t.Fatalf("branches = %v, %v", branches, err)
	}
	log, err := s.Log("acme", "calc", "feature")
	if err != nil || len(log) != 2 || log[0].Subject != "Add NEW" || log[1].Subject != "Initial commit" {
		t.Fatalf("log = %+v, %v", log, err)
	}
	if log[1].Author != GitAuthorName+" <"+GitAuthorEmail+">" {
		t.Errorf("initial author = %q", log[1].Author)
	}
	got, err := s.FileAt("acme", "calc", "feature", "NEW.md")
	if err != nil || got != "new\n" {
		t.Errorf("FileAt = %q, %v", got, err)
	}

	h, err := s.PushCommit("acme", "calc", "feature", map[string]string{"docs/other.md": "other\n"}, "Other person's change\n\nbody")
	if err != nil {
		t.Fatal(err)
	}
	log, _ = s.Log("acme", "calc", "feature")
	if log[0].Hash != h || log[0].Subject != "Other person's change" || log[0].Message != "Other person's change\n\nbody" || log[1].Subject != "Add NEW" {
		t.Errorf("log after PushCommit = %+v", log)
	}
	if _, err := s.RemoveFiles("acme", "calc", "main", []string{"README.md"}, "Remove README"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FileAt("acme", "calc", "main", "README.md"); err == nil {
		t.Error("README.md still on main after RemoveFiles")
	}
	if _, err := s.FileAt("acme", "calc", "main", "calc.go"); err != nil {
		t.Errorf("RemoveFiles removed more than asked: %v", err)
	}
	mustGit(t, dir, "pull", "--quiet", "--ff-only", "origin", "feature")
	if b, err := os.ReadFile(filepath.Join(dir, "docs/other.md")); err != nil || string(b) != "other\n" {
		t.Errorf("pulled docs/other.md = %q, %v", b, err)
	}
	// PushCommit on a new branch starts from the default branch.
	if _, err := s.PushCommit("acme", "calc", "fresh", map[string]string{"f": "x"}, "fresh"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FileAt("acme", "calc", "fresh", "calc.go"); err != nil || !strings.Contains(got, "package calc") {
		t.Errorf("fresh branch lacks calc.go: %v", err)
	}
}

func TestGitServerModesAndSymlinks(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	s := NewGitServer(t)
	if _, err := s.CreateRepoFromDir("acme", "modes", src, "trunk"); err != nil {
		t.Fatal(err)
	}
	dir, _ := s.RepoDir("acme", "modes")
	out := mustGit(t, "", "--git-dir="+dir, "ls-tree", "trunk")
	if !strings.Contains(out, "100755 blob") || !strings.Contains(out, "120000 blob") {
		t.Errorf("ls-tree = %s", out)
	}
	if head := strings.TrimSpace(mustGit(t, "", "--git-dir="+dir, "symbolic-ref", "HEAD")); head != "refs/heads/trunk" {
		t.Errorf("HEAD = %s", head)
	}
}

func TestGitServerAuth(t *testing.T) {
	s := NewGitServer(t)
	if _, err := s.CreateRepo("acme", "r", map[string]string{"a": "b"}, "main"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		user, pwd string
		want      int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong token", GitTokenUser, "nope", http.StatusUnauthorized},
		{"wrong user", "someone", s.Token, http.StatusUnauthorized},
		{"valid", GitTokenUser, s.Token, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, s.CloneURL("acme", "r")+"/info/refs?service=git-upload-pack", nil)
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pwd)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// The CLI without credentials fails, and SetAuthorize changes the rule.
	if _, err := runGit("", "ls-remote", s.CloneURL("acme", "r")); err == nil {
		t.Error("ls-remote without token succeeded")
	}
	s.SetAuthorize(func(tok string) bool { return tok == "ghs_installation" })
	if _, err := runGit("", "ls-remote", authURL(s, "acme", "r")); err == nil {
		t.Error("old token still accepted after SetAuthorize")
	}
	url := strings.Replace(s.CloneURL("acme", "r"), "http://", "http://"+GitTokenUser+":ghs_installation@", 1)
	if out := mustGit(t, "", "ls-remote", url); !strings.Contains(out, "refs/heads/main") {
		t.Errorf("ls-remote = %q", out)
	}
}

func TestGitServerBadNames(t *testing.T) {
	s := NewGitServer(t)
	for _, name := range [][2]string{{"..", "x"}, {"a/b", "c"}, {"a", ""}, {"a", ".hidden"}} {
		if _, err := s.CreateRepo(name[0], name[1], map[string]string{"a": "b"}, "main"); err == nil {
			t.Errorf("CreateRepo(%q, %q) succeeded", name[0], name[1])
		}
	}
	if _, err := s.CreateRepo("acme", "r", map[string]string{"../escape": "x"}, "main"); err == nil {
		t.Error("file path with .. accepted")
	}
	if _, err := s.CreateRepo("acme", "r2", map[string]string{"a": "b"}, "bad..branch"); err == nil {
		t.Error("bad branch name accepted")
	}
}
