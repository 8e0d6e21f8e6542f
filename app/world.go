package app

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gohands/gohands/app/apptest"
)

// The offline world's sample repository and the recorded conversation that
// solves its issue, embedded so the demo runs from any directory.
var (
	//go:embed all:testdata/sample
	sampleFS embed.FS
	//go:embed testdata/sample.llm.json
	sampleScript []byte
)

// The sample's names in the offline world.
const (
	sampleOwner = "octo-org"
	sampleRepo  = "greet"
	sampleUser  = "alice"
	sampleTitle = "greet.sh misspells Hello"
	sampleBody  = "Running `sh greet.sh Ada` prints `Helo, Ada!`; it should print `Hello, Ada!`. The tests in `test.sh` fail."
)

// world is GitHub, a git remote and a model, all on this machine: the
// GitHub API emulator, a bare repository served by git http-backend, and a
// scripted model replaying a recorded conversation. The demo and the
// end-to-end tests run the real App against it.
type world struct {
	dir      string
	gh       *apptest.GitHub
	git      *apptest.GitServer
	llm      *apptest.LLM // the replay of the recorded conversation
	cloneURL string
	issue    int
}

// startWorld starts the world in dir with the sample repository, one issue
// about its bug, and the replay of the recorded conversation that fixes it.
func startWorld(dir string) (*world, error) {
	return startWorldWith(dir, apptest.GitHubOptions{})
}

// startWorldWith starts the world with the GitHub emulator built from opts.
func startWorldWith(dir string, opts apptest.GitHubOptions) (*world, error) {
	w := &world{dir: dir}
	gh, err := apptest.NewGitHubServer(opts)
	if err != nil {
		return nil, fmt.Errorf("GitHub emulator: %w", err)
	}
	w.gh = gh
	w.git, err = apptest.StartGitServer(filepath.Join(dir, "remote"), gh.ValidToken)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("git server: %w", err)
	}
	src := filepath.Join(dir, "sample")
	if err := extractSample(src); err != nil {
		w.close()
		return nil, err
	}
	w.cloneURL, err = w.git.CreateRepoFromDir(sampleOwner, sampleRepo, src, "main")
	if err != nil {
		w.close()
		return nil, fmt.Errorf("sample repository: %w", err)
	}
	gh.AddRepo(apptest.GitHubRepo{Owner: sampleOwner, Name: sampleRepo, DefaultBranch: "main", CloneURL: w.cloneURL})
	if err := gh.SetPermission(sampleOwner, sampleRepo, sampleUser, "write"); err != nil {
		w.close()
		return nil, err
	}
	w.issue, err = gh.AddIssue(sampleOwner, sampleRepo, apptest.GitHubIssue{Title: sampleTitle, Body: sampleBody, Author: sampleUser})
	if err != nil {
		w.close()
		return nil, err
	}
	var steps []apptest.LLMStep
	if err := json.Unmarshal(sampleScript, &steps); err != nil {
		w.close()
		return nil, fmt.Errorf("recorded conversation: %w", err)
	}
	w.llm = apptest.NewLLMServer(steps...)
	w.llm.SetVarFromRequest("WORKDIR", workDirInPrompt)
	return w, nil
}

// workDirInPrompt finds the workspace path the system prompt names, so a
// recorded conversation replays against any sandbox.
var workDirInPrompt = regexp.MustCompile(`is checked out at (/\S+)`)

func extractSample(dst string) error {
	sub, err := fs.Sub(sampleFS, "testdata/sample")
	if err != nil {
		return err
	}
	if err := os.CopyFS(dst, sub); err != nil {
		return fmt.Errorf("extract the sample repository: %w", err)
	}
	// embed drops modes; the scripts are executable in the repository.
	for _, f := range []string{"greet.sh", "test.sh", ".openhands/setup.sh"} {
		if err := os.Chmod(filepath.Join(dst, f), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) close() {
	if w.llm != nil {
		w.llm.Close()
	}
	if w.git != nil {
		w.git.Close()
	}
	if w.gh != nil {
		w.gh.Close()
	}
}

// config is a configuration that points gohands at the world.
func (w *world) config(storeDir string) Config {
	cfg, _ := ParseConfig(nil)
	cfg.GitHub.WebURL = w.gh.URL
	cfg.GitHub.V3APIURL = w.gh.URL + "/"
	cfg.GitHub.App.IntegrationID = w.gh.AppID
	cfg.GitHub.App.WebhookSecret = w.gh.WebhookSecret
	cfg.GitHub.App.PrivateKey = string(w.gh.PrivateKeyPEM)
	cfg.Store.Path = storeDir
	cfg.Runner.Workers = 2
	cfg.Runner.PushInterval = time.Minute
	cfg.Sandbox.SetupTimeout = time.Minute
	cfg.LLM.BaseURL = w.llm.URL()
	cfg.LLM.Model = "replay"
	cfg.LLM.APIKey = "demo-key-not-secret"
	return cfg
}

// webhook sends a signed webhook to the App at url and returns the status.
func (w *world) webhook(ctx context.Context, url, event, delivery string, payload any) (int, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, err
	}
	req, err := w.gh.WebhookRequest(url, event, delivery, body)
	if err != nil {
		return 0, err
	}
	req = req.WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("send %s webhook: %w", event, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// labeled is the issues.labeled event of a person adding label to issue.
func (w *world) labeled(issue int, label, sender string) *github.IssuesEvent {
	return &github.IssuesEvent{
		Action:       github.String("labeled"),
		Label:        &github.Label{Name: github.String(label)},
		Issue:        &github.Issue{Number: github.Int(issue), Title: github.String(sampleTitle), User: &github.User{Login: github.String(sampleUser)}},
		Repo:         w.repoPayload(),
		Sender:       &github.User{Login: github.String(sender), Type: github.String("User")},
		Installation: &github.Installation{ID: github.Int64(w.gh.InstallationID)},
	}
}

func (w *world) repoPayload() *github.Repository {
	return &github.Repository{
		Name:          github.String(sampleRepo),
		FullName:      github.String(sampleOwner + "/" + sampleRepo),
		Owner:         &github.User{Login: github.String(sampleOwner)},
		CloneURL:      github.String(w.cloneURL),
		DefaultBranch: github.String("main"),
	}
}
