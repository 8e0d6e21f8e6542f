package apptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// GitTokenUser is the HTTP basic-auth user name the GitServer expects,
// the same one GitHub accepts with installation tokens.
const GitTokenUser = "x-access-token"

// GitAuthor is the identity of commits the GitServer makes itself
// (initial commits and PushCommit, "another person").
const (
	GitAuthorName  = "Octo Person"
	GitAuthorEmail = "octo@example.com"
)

// gitTimeout bounds every git command the server helpers run.
const gitTimeout = 30 * time.Second

var gitNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)

// GitServer is a real git remote served over smart HTTP by `git http-backend`
// for tests and the demo, with installation-token style basic auth.
type GitServer struct {
	// URL is the base URL, e.g. http://127.0.0.1:port; repositories live at
	// URL/owner/name.git.
	URL string
	// Root is the directory holding the bare repositories (Root/owner/name.git).
	Root string
	// Token is the token accepted by the default authorizer; empty when a
	// custom authorizer was given to StartGitServer.
	Token string

	srv     *httptest.Server
	gitPath string
	auth    atomic.Pointer[func(string) bool]

	uploadPackRequests  atomic.Int64
	uploadPackBytes     atomic.Int64
	receivePackRequests atomic.Int64
	unauthorized        atomic.Int64
	deniedPushes        atomic.Int64
	readOnly            atomic.Bool

	mu sync.Mutex // serializes writes by the helpers (CreateRepo, PushCommit)
}

// GitServerStats counts what the GitServer served, so tests can show that a
// warm fetch downloads only what is new.
type GitServerStats struct {
	UploadPackRequests  int64 // POST .../git-upload-pack (fetches and clones)
	UploadPackBytes     int64 // response bytes of those requests (the packs)
	ReceivePackRequests int64 // POST .../git-receive-pack (pushes)
	Unauthorized        int64 // requests answered with 401
}

// GitCommit is one commit as read back from a GitServer repository.
type GitCommit struct {
	Hash    string
	Subject string
	Author  string // "Name <email>"
	Message string // the full message, trailers included
}

// NewGitServer starts a GitServer on 127.0.0.1 with a random token (in
// Token) over a temporary root, closed when the test ends.
func NewGitServer(tb testing.TB) *GitServer {
	tb.Helper()
	s, err := StartGitServer(tb.TempDir(), nil)
	if err != nil {
		tb.Fatalf("start git server: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartGitServer serves the bare repositories under root. authorize decides
// which tokens may read and push; nil accepts only a random token, returned
// in the server's Token field.
func StartGitServer(root string, authorize func(token string) bool) (*GitServer, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git server: the git CLI is needed: %w", err)
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("git server root %q: %w", root, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("git server root: %w", err)
	}
	s := &GitServer{Root: root, gitPath: gitPath}
	if authorize == nil {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("git server token: %w", err)
		}
		token := "ghs_" + hex.EncodeToString(b[:])
		s.Token = token
		authorize = func(t string) bool { return t == token }
	}
	s.auth.Store(&authorize)
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s, nil
}

// SetAuthorize replaces the token check, e.g. with the GitHub emulator's
// installation tokens once it exists.
func (s *GitServer) SetAuthorize(authorize func(token string) bool) {
	s.auth.Store(&authorize)
}

// Close stops the server; the repositories stay on disk under Root.
func (s *GitServer) Close() { s.srv.Close() }

// SetReadOnly makes every push fail with 403, as GitHub does for an App
// installed without the contents: write permission; fetches still work.
func (s *GitServer) SetReadOnly(readOnly bool) { s.readOnly.Store(readOnly) }

// Stats returns the counters since the start or the last ResetStats.
func (s *GitServer) Stats() GitServerStats {
	return GitServerStats{
		UploadPackRequests:  s.uploadPackRequests.Load(),
		UploadPackBytes:     s.uploadPackBytes.Load(),
		ReceivePackRequests: s.receivePackRequests.Load(),
		Unauthorized:        s.unauthorized.Load(),
	}
}

// ResetStats sets all counters to zero.
func (s *GitServer) ResetStats() {
	s.uploadPackRequests.Store(0)
	s.uploadPackBytes.Store(0)
	s.receivePackRequests.Store(0)
	s.unauthorized.Store(0)
}

// CloneURL is the credential-free HTTP URL of owner/name.
func (s *GitServer) CloneURL(owner, name string) string {
	return s.URL + "/" + owner + "/" + name + ".git"
}

// ServeHTTP checks the token and hands the request to git http-backend.
func (s *GitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, token, ok := r.BasicAuth()
	authorize := *s.auth.Load()
	if !ok || user != GitTokenUser || authorize == nil || !authorize(token) {
		s.unauthorized.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="gohands git"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 || !gitNameRE.MatchString(parts[0]) || !strings.HasSuffix(parts[1], ".git") ||
		!gitNameRE.MatchString(strings.TrimSuffix(parts[1], ".git")) {
		http.Error(w, "not a repository path: want /owner/name.git/...", http.StatusNotFound)
		return
	}
	if s.readOnly.Load() && (r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack")) {
		// What GitHub answers a token without contents: write.
		s.deniedPushes.Add(1)
		http.Error(w, fmt.Sprintf("Permission to %s/%s denied to %s.", parts[0], parts[1], user), http.StatusForbidden)
		return
	}
	r = r.Clone(r.Context())
	r.Header.Del("Authorization") // keep the token out of the CGI environment
	var counter *atomic.Int64
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
		s.uploadPackRequests.Add(1)
		counter = &s.uploadPackBytes
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack"):
		s.receivePackRequests.Add(1)
	}
	h := &cgi.Handler{
		Path: s.gitPath,
		Args: []string{"http-backend"},
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=" + user,
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
		},
		InheritEnv: []string{"PATH"},
	}
	if counter != nil {
		w = &countingWriter{ResponseWriter: w, n: counter}
	}
	h.ServeHTTP(w, r)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// Flush lets http-backend's streamed responses through.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// CreateRepo makes the bare repository owner/name with one initial commit of
// files (path → content) on defaultBranch, and returns its clone URL.
func (s *GitServer) CreateRepo(owner, name string, files map[string]string, defaultBranch string) (string, error) {
	entries := make([]gitEntry, 0, len(files))
	for p, c := range files {
		entries = append(entries, gitEntry{path: p, mode: "100644", content: []byte(c)})
	}
	return s.createRepo(owner, name, entries, defaultBranch)
}

// CreateRepoFromDir is CreateRepo with the files of dir (such as
// testdata/repos/calc), keeping executable bits and symbolic links.
func (s *GitServer) CreateRepoFromDir(owner, name, dir, defaultBranch string) (string, error) {
	entries, err := readTree(dir)
	if err != nil {
		return "", fmt.Errorf("create repo %s/%s from %s: %w", owner, name, dir, err)
	}
	return s.createRepo(owner, name, entries, defaultBranch)
}

func (s *GitServer) createRepo(owner, name string, entries []gitEntry, defaultBranch string) (string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return "", err
	}
	if defaultBranch == "" {
		return "", fmt.Errorf("create repo %s/%s: empty default branch", owner, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(gitDir); err == nil {
		return "", fmt.Errorf("create repo %s/%s: already exists", owner, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	if _, err := s.git(ctx, "", nil, nil, "init", "--quiet", "--bare", "--initial-branch="+defaultBranch, gitDir); err != nil {
		return "", fmt.Errorf("create repo %s/%s: %w", owner, name, err)
	}
	// Like GitHub, check what is pushed.
	for _, kv := range [][2]string{{"http.receivepack", "true"}, {"receive.fsckObjects", "true"}} {
		if _, err := s.git(ctx, gitDir, nil, nil, "config", kv[0], kv[1]); err != nil {
			return "", fmt.Errorf("create repo %s/%s: %w", owner, name, err)
		}
	}
	if len(entries) > 0 {
		if _, err := s.commitEntries(ctx, gitDir, defaultBranch, entries, "Initial commit"); err != nil {
			return "", fmt.Errorf("create repo %s/%s: %w", owner, name, err)
		}
	}
	return s.CloneURL(owner, name), nil
}

// PushCommit commits files (path → content, added or replaced) on top of
// branch directly in the remote, as another person pushing would, creating
// the branch from the default branch if needed; it returns the new commit hash.
func (s *GitServer) PushCommit(owner, name, branch string, files map[string]string, msg string) (string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return "", err
	}
	entries := make([]gitEntry, 0, len(files))
	for p, c := range files {
		entries = append(entries, gitEntry{path: p, mode: "100644", content: []byte(c)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	h, err := s.commitEntries(ctx, gitDir, branch, entries, msg)
	if err != nil {
		return "", fmt.Errorf("push commit to %s/%s %s: %w", owner, name, branch, err)
	}
	return h, nil
}

// RemoveFiles commits the deletion of paths on branch directly in the
// remote, as another person pushing would; it returns the new commit hash.
func (s *GitServer) RemoveFiles(owner, name, branch string, paths []string, msg string) (string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return "", err
	}
	entries := make([]gitEntry, 0, len(paths))
	for _, p := range paths {
		entries = append(entries, gitEntry{path: p, remove: true})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	h, err := s.commitEntries(ctx, gitDir, branch, entries, msg)
	if err != nil {
		return "", fmt.Errorf("remove files from %s/%s %s: %w", owner, name, branch, err)
	}
	return h, nil
}

// Branches lists the branch names of owner/name, sorted.
func (s *GitServer) Branches(owner, name string) ([]string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	out, err := s.git(ctx, gitDir, nil, nil, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/")
	if err != nil {
		return nil, fmt.Errorf("branches of %s/%s: %w", owner, name, err)
	}
	branches := strings.Fields(string(out))
	sort.Strings(branches)
	return branches, nil
}

// Log returns the commits reachable from branch (or any ref), newest first.
func (s *GitServer) Log(owner, name, branch string) ([]GitCommit, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	out, err := s.git(ctx, gitDir, nil, nil, "log", "--format=%H%x00%s%x00%an <%ae>%x00%B%x1e", branch, "--")
	if err != nil {
		return nil, fmt.Errorf("log of %s/%s %s: %w", owner, name, branch, err)
	}
	var commits []GitCommit
	for _, rec := range strings.Split(string(out), "\x1e") {
		rec = strings.TrimLeft(rec, "\n")
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\x00", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("log of %s/%s %s: unexpected record %q", owner, name, branch, rec)
		}
		commits = append(commits, GitCommit{Hash: f[0], Subject: f[1], Author: f[2], Message: strings.TrimRight(f[3], "\n")})
	}
	return commits, nil
}

// FileAt returns the content of path at ref (a branch, tag or hash).
func (s *GitServer) FileAt(owner, name, ref, path string) (string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	out, err := s.git(ctx, gitDir, nil, nil, "show", ref+":"+path)
	if err != nil {
		return "", fmt.Errorf("file %s at %s in %s/%s: %w", path, ref, owner, name, err)
	}
	return string(out), nil
}

// RepoDir is the directory of the bare repository owner/name.
func (s *GitServer) RepoDir(owner, name string) (string, error) { return s.repoDir(owner, name) }

func (s *GitServer) repoDir(owner, name string) (string, error) {
	if !gitNameRE.MatchString(owner) || !gitNameRE.MatchString(name) {
		return "", fmt.Errorf("git server: invalid repository name %q/%q", owner, name)
	}
	return filepath.Join(s.Root, owner, name+".git"), nil
}

type gitEntry struct {
	path    string
	mode    string // 100644, 100755 or 120000
	content []byte // file content or symlink target
	remove  bool   // delete path instead
}

// commitEntries writes entries on top of branch (or, if branch does not
// exist, of HEAD's branch, or of nothing) with git plumbing and moves branch.
func (s *GitServer) commitEntries(ctx context.Context, gitDir, branch string, entries []gitEntry, msg string) (string, error) {
	tmp, err := os.MkdirTemp("", "gitserver-index-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	env := []string{
		"GIT_INDEX_FILE=" + filepath.Join(tmp, "index"),
		"GIT_AUTHOR_NAME=" + GitAuthorName, "GIT_AUTHOR_EMAIL=" + GitAuthorEmail,
		"GIT_COMMITTER_NAME=" + GitAuthorName, "GIT_COMMITTER_EMAIL=" + GitAuthorEmail,
	}
	ref := "refs/heads/" + branch
	if _, err := s.git(ctx, gitDir, nil, nil, "check-ref-format", ref); err != nil {
		return "", fmt.Errorf("invalid branch name %q: %w", branch, err)
	}
	old := ""
	parent := ""
	if out, err := s.git(ctx, gitDir, nil, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err == nil {
		old = strings.TrimSpace(string(out))
		parent = old
	} else if out, err := s.git(ctx, gitDir, nil, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err == nil {
		parent = strings.TrimSpace(string(out))
	}
	if parent != "" {
		if _, err := s.git(ctx, gitDir, env, nil, "read-tree", parent); err != nil {
			return "", err
		}
	}
	var info bytes.Buffer
	for _, e := range entries {
		if e.path == "" || strings.HasPrefix(e.path, "/") || strings.Contains("/"+e.path+"/", "/../") || strings.Contains("/"+e.path+"/", "/.git/") {
			return "", fmt.Errorf("invalid file path %q", e.path)
		}
		if e.remove {
			// Mode 0 removes the path from the index.
			fmt.Fprintf(&info, "0 %s\t%s\n", strings.Repeat("0", 40), e.path)
			continue
		}
		out, err := s.git(ctx, gitDir, nil, e.content, "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&info, "%s %s\t%s\n", e.mode, strings.TrimSpace(string(out)), e.path)
	}
	if _, err := s.git(ctx, gitDir, env, info.Bytes(), "update-index", "--add", "--index-info"); err != nil {
		return "", err
	}
	out, err := s.git(ctx, gitDir, env, nil, "write-tree")
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", strings.TrimSpace(string(out)), "-F", "-"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	out, err = s.git(ctx, gitDir, env, []byte(msg), args...)
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(out))
	// The old value makes the update fail instead of losing a concurrent push.
	if _, err := s.git(ctx, gitDir, nil, nil, "update-ref", ref, commit, old); err != nil {
		return "", err
	}
	return commit, nil
}

// git runs the git CLI on gitDir (if not empty) with isolated configuration.
func (s *GitServer) git(ctx context.Context, gitDir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, s.gitPath, args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	if gitDir != "" {
		cmd.Env = append(cmd.Env, "GIT_DIR="+gitDir)
	}
	cmd.Env = append(cmd.Env, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// readTree reads the files of dir as git entries, skipping any .git directory.
func readTree(dir string) ([]gitEntry, error) {
	var entries []gitEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries = append(entries, gitEntry{path: rel, mode: "120000", content: []byte(target)})
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := "100644"
			if info.Mode()&0o111 != 0 {
				mode = "100755"
			}
			entries = append(entries, gitEntry{path: rel, mode: mode, content: b})
		default:
			return fmt.Errorf("%s: not a regular file or symlink", p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, errors.New("no files")
	}
	return entries, nil
}
