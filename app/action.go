package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/handlers"
	"github.com/gohands/gohands/runner"
)

// ActionEnv is what GitHub Actions tells a step about its run.
type ActionEnv struct {
	EventName  string // GITHUB_EVENT_NAME
	EventPath  string // GITHUB_EVENT_PATH
	Token      string // GITHUB_TOKEN
	Repository string // GITHUB_REPOSITORY, owner/name
	APIURL     string // GITHUB_API_URL
	ServerURL  string // GITHUB_SERVER_URL
	RunID      string // GITHUB_RUN_ID, for the delivery id
	Temp       string // RUNNER_TEMP, where the store goes when the config names none
	Output     string // GITHUB_OUTPUT, the file of the step's outputs
	Summary    string // GITHUB_STEP_SUMMARY, the file of the run's summary (Markdown)
}

// actionEnvFromOS reads ActionEnv from the environment and names what is missing.
func actionEnvFromOS() (ActionEnv, error) {
	e := ActionEnv{
		EventName:  os.Getenv("GITHUB_EVENT_NAME"),
		EventPath:  os.Getenv("GITHUB_EVENT_PATH"),
		Token:      os.Getenv("GITHUB_TOKEN"),
		Repository: os.Getenv("GITHUB_REPOSITORY"),
		APIURL:     os.Getenv("GITHUB_API_URL"),
		ServerURL:  os.Getenv("GITHUB_SERVER_URL"),
		RunID:      os.Getenv("GITHUB_RUN_ID"),
		Temp:       os.Getenv("RUNNER_TEMP"),
		Output:     os.Getenv("GITHUB_OUTPUT"),
		Summary:    os.Getenv("GITHUB_STEP_SUMMARY"),
	}
	var missing []string
	for name, v := range map[string]string{
		"GITHUB_EVENT_NAME": e.EventName, "GITHUB_EVENT_PATH": e.EventPath,
		"GITHUB_TOKEN": e.Token, "GITHUB_REPOSITORY": e.Repository,
	} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return e, fmt.Errorf("not running inside GitHub Actions? %s not set (pass the token with `env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}`)", strings.Join(missing, ", "))
	}
	if e.APIURL == "" {
		e.APIURL = DefaultV3APIURL
	}
	if e.ServerURL == "" {
		e.ServerURL = DefaultWebURL
	}
	return e, nil
}

// ActionLogin is the identity GITHUB_TOKEN acts as.
const ActionLogin = "github-actions[bot]"

func runAction(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("action", stderr)
	path := fs.String("config", "", "a configuration file (optional: model, sandbox and limits; the github: section is not needed)")
	model := fs.String("model", "", "the model (overrides llm.model)")
	baseURL := fs.String("llm-base-url", "", "an OpenAI-compatible endpoint (overrides llm.base_url)")
	mention := fs.String("mention", DefaultLabel, "the name people @-mention to ask for work")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	env, err := actionEnvFromOS()
	if err != nil {
		return err
	}
	var cfg Config
	if *path != "" {
		data, err := os.ReadFile(*path)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		if cfg, err = ParseConfig(data); err != nil {
			return fmt.Errorf("%s: %w", *path, err)
		}
	} else {
		cfg, _ = ParseConfig(nil)
		cfg.LLM.APIKey = os.Getenv("OPENAI_API_KEY")
		if env.Temp != "" {
			cfg.Store.Path = filepath.Join(env.Temp, "gohands")
		}
	}
	if *model != "" {
		cfg.LLM.Model = *model
	}
	if *baseURL != "" {
		cfg.LLM.BaseURL = *baseURL
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usageError{err}
	}
	job, err := RunAction(ctx, cfg, env, ActionOptions{Slug: *mention, Options: Options{Logger: log}})
	if err != nil {
		return err
	}
	if err := writeActionResult(env, job); err != nil {
		log.Warn("write the step's outputs and summary", "err", err)
	}
	if job == nil {
		fmt.Fprintf(stdout, "gohands: nothing to do for this %s event\n", env.EventName)
		return nil
	}
	fmt.Fprintf(stdout, "gohands: job %s for %s %s", job.ID, job.Key, job.State)
	if job.PullRequest > 0 {
		fmt.Fprintf(stdout, " (pull request #%d)", job.PullRequest)
	}
	fmt.Fprintln(stdout)
	if job.State != runner.StateSucceeded {
		return fmt.Errorf("job %s: %s", job.State, job.Reason)
	}
	return nil
}

// writeActionResult tells the workflow what the job did: step outputs in
// GITHUB_OUTPUT for later steps (state, job_id, pull_request,
// pull_request_url, reason) and a few lines in the run's summary
// (GITHUB_STEP_SUMMARY). Outside a runner neither file is named and
// nothing is written. job is nil when the event asked for nothing.
func writeActionResult(env ActionEnv, job *runner.Job) error {
	state, summary := "skipped", fmt.Sprintf("Nothing to do for this `%s` event: it is not a request to gohands, or not from someone with write access.", env.EventName)
	var jobID, pr, prURL, reason string
	if job != nil {
		state, jobID, reason = string(job.State), job.ID, job.Reason
		issueURL := fmt.Sprintf("%s/%s/%s/issues/%d", strings.TrimSuffix(env.ServerURL, "/"), job.Key.Owner, job.Key.Repo, job.Key.Number)
		summary = fmt.Sprintf("Job `%s` on [%s](%s) %s", job.ID, job.Key, issueURL, job.State)
		if job.PullRequest > 0 {
			pr = strconv.Itoa(job.PullRequest)
			prURL = fmt.Sprintf("%s/%s/%s/pull/%d", strings.TrimSuffix(env.ServerURL, "/"), job.Key.Owner, job.Key.Repo, job.PullRequest)
			summary += fmt.Sprintf(": pull request [#%d](%s)", job.PullRequest, prURL)
		}
		summary += "."
		if reason != "" {
			summary += "\n\n" + reason
		}
	}
	icon := map[string]string{"succeeded": "✅ ", "failed": "❌ ", "cancelled": "⏹️ "}[state]
	var errs []error
	if env.Summary != "" {
		errs = append(errs, appendFile(env.Summary, fmt.Sprintf("### %sgohands\n\n%s\n", icon, summary)))
	}
	if env.Output != "" {
		var b strings.Builder
		for _, kv := range [][2]string{{"state", state}, {"job_id", jobID}, {"pull_request", pr}, {"pull_request_url", prURL}, {"reason", reason}} {
			writeOutput(&b, kv[0], kv[1])
		}
		errs = append(errs, appendFile(env.Output, b.String()))
	}
	return errors.Join(errs...)
}

// writeOutput writes one step output in GITHUB_OUTPUT's format: name=value,
// or a heredoc with a delimiter the value cannot contain when it spans
// lines.
func writeOutput(b *strings.Builder, name, value string) {
	if !strings.ContainsAny(value, "\r\n") {
		fmt.Fprintf(b, "%s=%s\n", name, value)
		return
	}
	delim := "gohands_EOF"
	for strings.Contains(value, delim) {
		delim += "_"
	}
	fmt.Fprintf(b, "%s<<%s\n%s\n%s\n", name, delim, value, delim)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ActionOptions are the Actions mode's parts that are not configuration.
type ActionOptions struct {
	Options
	// Slug is the name people @-mention; the workflow has no App to ask.
	Slug string
}

// RunAction runs the one job an Actions event asks for, in-process with
// the server's pipeline, and returns it once done; nil when the event asks
// for nothing (not a trigger, not a person with write access).
func RunAction(ctx context.Context, cfg Config, env ActionEnv, opts ActionOptions) (*runner.Job, error) {
	if errs := cfg.validateCommon(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	payload, err := os.ReadFile(env.EventPath)
	if err != nil {
		return nil, fmt.Errorf("GITHUB_EVENT_PATH: %w", err)
	}
	opts.Options = opts.Options.withDefaults()
	log, base := opts.Logger, opts.Transport
	log = runner.MaskLogger(log, env.Token, cfg.LLM.APIKey)
	creds := &tokenCredentials{apiURL: strings.TrimSuffix(env.APIURL, "/"), token: env.Token, base: base}
	slug := opts.Slug
	if slug == "" {
		slug = DefaultLabel
	}
	bot := handlers.Bot{Slug: slug, Login: ActionLogin}
	var (
		mu  sync.Mutex
		ids []string
	)
	c := components{cfg: cfg, log: log, creds: creds, bot: bot, instance: opts.Instance, secrets: []string{env.Token, cfg.LLM.APIKey},
		notify: func(ev runner.Event) {
			mu.Lock()
			if !slices.Contains(ids, ev.Job.ID) {
				ids = append(ids, ev.Job.ID)
			}
			mu.Unlock()
		}}
	a, err := c.build(ctx)
	if err != nil {
		return nil, err
	}
	defer a.store.Close()
	h := handlerFor(handlers.All(a.handlerBase(creds.Client)), env.EventName)
	if h == nil {
		return nil, nil
	}
	delivery := "actions-" + env.RunID
	if env.RunID == "" {
		delivery = ""
	}
	err = h.Handle(ctx, env.EventName, delivery, payload)
	a.courtesy.Wait()
	if err != nil {
		return nil, fmt.Errorf("%s event: %w", env.EventName, err)
	}
	mu.Lock()
	queued := slices.Clone(ids)
	mu.Unlock()
	if len(queued) == 0 {
		return nil, nil
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.queue.Run(runCtx) }()
	job, err := a.queue.Wait(ctx, queued[0])
	stop()
	if qerr := <-done; qerr != nil && !errors.Is(qerr, context.Canceled) && err == nil {
		err = qerr
	}
	return job, err
}

func handlerFor(hs []githubapp.EventHandler, event string) githubapp.EventHandler {
	for _, h := range hs {
		if slices.Contains(h.Handles(), event) {
			return h
		}
	}
	return nil
}
