package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gohands/gohands/runner"
	"github.com/gohands/gohands/runner/agent"
	"github.com/gohands/gohands/sandbox"
)

// DemoImage is the small sandbox image the demo builds when Docker answers
// and the image is missing: busybox and bash from the host's Debian packages.
const DemoImage = "gohands-demo:1"

// DemoOptions configure the offline demo.
type DemoOptions struct {
	// LLMBaseURL and Model select a real model instead of the replay; the
	// key comes from OPENAI_API_KEY.
	LLMBaseURL, Model, APIKey string
	// Sandbox is "auto" (Docker when it answers, else the process driver),
	// "docker" or "process".
	Sandbox string
	// Image overrides the sandbox image (docker).
	Image string
	// Dir keeps the demo's files there instead of a removed temp directory.
	Dir string
	// Timeout bounds the job.
	Timeout time.Duration
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	var o DemoOptions
	fs.StringVar(&o.LLMBaseURL, "llm-base-url", "", "use a real OpenAI-compatible model at this URL instead of the replay (key from OPENAI_API_KEY)")
	fs.StringVar(&o.Model, "model", "", "the model, with -llm-base-url")
	fs.StringVar(&o.Sandbox, "sandbox", "auto", "auto, docker or process")
	fs.StringVar(&o.Image, "image", "", "the sandbox image (default "+DemoImage+", built if missing)")
	fs.StringVar(&o.Dir, "dir", "", "keep the demo's files (store, remote, logs) in this directory")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long the job may take")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.LLMBaseURL != "" {
		o.APIKey = os.Getenv("OPENAI_API_KEY")
		if o.Model == "" {
			return usageError{errors.New("-model is needed with -llm-base-url")}
		}
	}
	return Demo(ctx, o, stdout)
}

// Demo runs the whole flow offline: the real server against the GitHub
// emulator, a sample repository served over smart HTTP, and the recorded
// conversation (or a real model); it labels the sample issue with a signed
// webhook, shows the job's progress and prints the pull request and its diff.
func Demo(ctx context.Context, o DemoOptions, out io.Writer) (err error) {
	start := time.Now()
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "gohands-demo-")
		if err != nil {
			return err
		}
		// Kept when the demo fails, for its log; removed when it succeeds.
		defer func() {
			if err == nil {
				os.RemoveAll(tmp)
			}
		}()
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(dir, "gohands.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))

	w, err := startWorld(dir)
	if err != nil {
		return err
	}
	defer w.close()
	cfg := w.config(filepath.Join(dir, "data"))
	cfg.Runner.JobTimeout = o.Timeout
	modelLine := "REPLAY of a recorded conversation for this sample (not a model; run with -llm-base-url and -model to watch a real one)"
	if o.LLMBaseURL != "" {
		cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.APIKey = o.LLMBaseURL, o.Model, o.APIKey
		modelLine = fmt.Sprintf("%s at %s", o.Model, o.LLMBaseURL)
	}
	sandboxLine, err := chooseDemoSandbox(ctx, &cfg, o, log)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "gohands demo: the whole flow, offline, on this machine\n\n")
	fmt.Fprintf(out, "  GitHub   emulator at %s (App %q, installation %d)\n", w.gh.URL, w.gh.Slug, w.gh.InstallationID)
	fmt.Fprintf(out, "  git      %s (git http-backend, token auth)\n", w.cloneURL)
	fmt.Fprintf(out, "  model    %s\n", modelLine)
	fmt.Fprintf(out, "  sandbox  %s\n", sandboxLine)
	fmt.Fprintf(out, "  log      %s (kept if the demo fails)\n", logPath)

	a, err := New(ctx, cfg, Options{Logger: log, Instance: "demo"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return err
	}
	srvCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.Serve(srvCtx, ln) }()
	defer func() {
		stop()
		<-served
	}()
	hook := "http://" + ln.Addr().String() + WebhookPath
	fmt.Fprintf(out, "  server   %s\n\n", hook)

	t0 := time.Now()
	status, err := w.webhook(ctx, hook, "issues", "demo-delivery-1", w.labeled(w.issue, cfg.Bot.Label, sampleUser))
	if err != nil {
		return err
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("the server answered the webhook with %d; see %s", status, logPath)
	}
	fmt.Fprintf(out, "→ @%s labeled issue #%d %q with %q (signed webhook answered %d in %s)\n",
		sampleUser, w.issue, sampleTitle, cfg.Bot.Label, status, time.Since(t0).Round(time.Millisecond))

	key := runner.Key{Owner: sampleOwner, Repo: sampleRepo, Number: w.issue}
	job, err := w.follow(ctx, a, key, t0, out)
	if err != nil {
		return err
	}
	if job.State != runner.StateSucceeded {
		return fmt.Errorf("the job %s: %s (log: %s)", job.State, job.Reason, logPath)
	}
	if err := w.printPullRequest(out, job.PullRequest); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nDone in %s.\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// follow prints the job's progress, as the tracking comment and the job's
// event log show it, until the job is done.
func (w *world) follow(ctx context.Context, a *App, key runner.Key, t0 time.Time, out io.Writer) (*runner.Job, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastLine string
	seen := 0
	eyes := false
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		at := func() string { return fmt.Sprintf("  [%5.1fs]", time.Since(t0).Seconds()) }
		if !eyes {
			for _, r := range w.gh.Reactions(key.Owner, key.Repo) {
				if r.Content == "eyes" {
					eyes = true
					fmt.Fprintf(out, "%s 👀 on the issue\n", at())
				}
			}
		}
		if line := w.trackingLine(key.Number); line != "" && line != lastLine {
			lastLine = line
			fmt.Fprintf(out, "%s %s\n", at(), line)
		}
		jobs, err := a.Queue().Jobs(key)
		if err != nil {
			return nil, err
		}
		if len(jobs) == 0 {
			continue
		}
		job := jobs[len(jobs)-1]
		if events, err := a.store.Events(job.ID); err == nil {
			for _, raw := range events[seen:] {
				if line := stepLine(raw); line != "" {
					fmt.Fprintf(out, "%s   %s\n", at(), line)
				}
			}
			seen = len(events)
		}
		if job.State.Done() {
			if line := w.trackingLine(key.Number); line != "" && line != lastLine {
				fmt.Fprintf(out, "%s %s\n", at(), line)
			}
			fmt.Fprintf(out, "%s job %s %s\n", at(), job.ID, job.State)
			return job, nil
		}
	}
}

// stepLine condenses an agent tool event of the job log to a line.
func stepLine(raw json.RawMessage) string {
	var e agent.Event
	if json.Unmarshal(raw, &e) != nil || e.Kind != agent.EventTool {
		return ""
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(e.Args), &args)
	what := ""
	for _, k := range []string{"command", "path", "thought", "message"} {
		if v, ok := args[k].(string); ok && v != "" {
			what += " " + v
		}
	}
	what = strings.Join(strings.Fields(what), " ")
	if len(what) > 70 {
		what = what[:67] + "..."
	}
	result := ""
	if code, ok := agent.ExitCode(e.Content); ok {
		result = fmt.Sprintf(" → exit %d", code)
	}
	if what != "" {
		what = " " + what
	}
	return fmt.Sprintf("🛠  %s%s%s", e.Tool, what, result)
}

// trackingLine condenses the tracking comment to its first lines of text.
func (w *world) trackingLine(issue int) string {
	comments, err := w.gh.Comments(sampleOwner, sampleRepo, issue)
	if err != nil {
		return ""
	}
	for _, c := range comments {
		if !strings.Contains(c.Body, "<!-- gohands:job=") {
			continue
		}
		var parts []string
		for line := range strings.SplitSeq(c.Body, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "<!--") || strings.HasPrefix(line, ">") || strings.HasPrefix(line, "<sub>") {
				continue
			}
			parts = append(parts, strings.ReplaceAll(line, "**", ""))
			if len(parts) == 2 {
				break
			}
		}
		return strings.Join(parts, " — ")
	}
	return ""
}

// printPullRequest prints the PR the job opened and its diff.
func (w *world) printPullRequest(out io.Writer, number int) error {
	prs, err := w.gh.PullRequests(sampleOwner, sampleRepo)
	if err != nil {
		return err
	}
	for _, pr := range prs {
		if pr.Number != number {
			continue
		}
		draft := ""
		if pr.Draft {
			draft = "draft, "
		}
		reviewers := ""
		if len(pr.Reviewers) > 0 {
			reviewers = ", review requested from @" + strings.Join(pr.Reviewers, ", @")
		}
		fmt.Fprintf(out, "\nPull request #%d: %s\n  %s/%s/%s/pull/%d\n  %s%s → %s%s\n\n",
			pr.Number, pr.Title, w.gh.URL, sampleOwner, sampleRepo, pr.Number, draft, pr.Head, pr.Base, reviewers)
		for line := range strings.SplitSeq(strings.TrimSpace(pr.Body), "\n") {
			fmt.Fprintf(out, "  | %s\n", line)
		}
		diff, err := w.git.Diff(sampleOwner, sampleRepo, pr.Base, pr.Head)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nDiff %s...%s:\n%s", pr.Base, pr.Head, diff)
		return nil
	}
	return fmt.Errorf("pull request #%d not found", number)
}

// chooseDemoSandbox picks the demo's sandbox: Docker with a small image
// when an engine answers (building the image if needed), else the process
// driver, said loudly.
func chooseDemoSandbox(ctx context.Context, cfg *Config, o DemoOptions, log *slog.Logger) (string, error) {
	image := o.Image
	if image == "" {
		image = DemoImage
	}
	if o.Sandbox == "process" {
		cfg.Sandbox.Driver = "process"
		return "process (NO isolation: commands run on this host, as asked with -sandbox process)", nil
	}
	pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	d, err := sandbox.NewDocker(pingCtx, sandbox.DockerOptions{Instance: "demo", Logger: log})
	cancel()
	if err == nil {
		defer d.Close()
		if cerr := d.CheckImage(ctx, image); cerr != nil && o.Image == "" {
			err = d.ImportMinimal(ctx, image, true)
		} else {
			err = cerr
		}
	}
	if err != nil {
		if o.Sandbox == "docker" {
			return "", fmt.Errorf("docker sandbox: %w", err)
		}
		cfg.Sandbox.Driver = "process"
		return fmt.Sprintf("process — WARNING: NO isolation, commands run on this host (no Docker sandbox: %v)", err), nil
	}
	cfg.Sandbox.Driver = "docker"
	cfg.Sandbox.Image = image
	return fmt.Sprintf("docker, image %s (a throwaway container, no credentials inside)", image), nil
}
