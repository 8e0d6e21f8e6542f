package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/google/go-github/v66/github"

	"github.com/gohands/gohands/runner/agent"
	"github.com/gohands/gohands/runner/gitrepo"
	"github.com/gohands/gohands/runner/publish"
	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/skills"
)

// Credentials gives the pipeline GitHub access for an installation. Both
// stay on the host: the token is used by gohands' own git client only.
type Credentials interface {
	Client(ctx context.Context, installationID int64) (*github.Client, error)
	Token(ctx context.Context, installationID int64) (string, error)
}

// LLMConfig selects the model and its budgets (the llm: section).
type LLMConfig struct {
	BaseURL, APIKey, Model string
	MaxIterations          int
	MaxTokens              int
	ContextWindow          int
}

// Bot is the App's identity and how it names what it makes.
type Bot struct {
	Slug, Login  string
	BranchPrefix string
	Draft        bool
	Label        string
}

// Mention is how people address the bot.
func (b Bot) Mention() string { return "@" + b.Slug }

// PipelineConfig is everything a Pipeline needs.
type PipelineConfig struct {
	Credentials  Credentials
	Driver       sandbox.Driver
	Sandbox      sandbox.Spec // a template: JobID and labels are set per job
	SetupTimeout time.Duration
	LLM          LLMConfig
	Bot          Bot
	// JobTimeout is the wall-clock limit of one job (runner.job_timeout).
	JobTimeout time.Duration
	// PushInterval is how often work in progress is pushed while the agent
	// works (runner.push_interval).
	PushInterval time.Duration
	// ForkNewPR answers a follow-up on a fork's pull request with a new PR
	// from a bot branch made from the fork's head (runner.fork_prs: new_pr).
	ForkNewPR bool
	// StoreDir holds the repository cache (repos/) and working trees (work/).
	StoreDir string
	// Store receives each job's event log.
	Store *Store
	// Secrets are masked wherever text leaves gohands.
	Secrets []string
	Logger  *slog.Logger
}

// Pipeline is the Executor that turns a job into a branch, a pull request
// and a tracking comment.
type Pipeline struct {
	cfg PipelineConfig
	log *slog.Logger

	cacheOnce sync.Once
	cache     *gitrepo.Cache
	cacheErr  error

	idMu    sync.Mutex
	userIDs map[string]int64

	lockMu      sync.Mutex
	branchLocks map[string]chan struct{}
}

// NewPipeline returns a pipeline; nothing is touched until the first job.
func NewPipeline(cfg PipelineConfig) *Pipeline {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Pipeline{cfg: cfg, log: log, userIDs: map[string]int64{}, branchLocks: map[string]chan struct{}{}}
}

var _ Executor = (*Pipeline)(nil)

// finishTimeout bounds the final GitHub writes of a job that was cancelled
// or is shutting down.
const finishTimeout = 30 * time.Second

// Execute runs one job from start to finish; see Executor.
func (p *Pipeline) Execute(ctx context.Context, job *Job) error {
	req := job.Latest()
	log := p.log.With("job", job.ID, "key", job.Key.String(), "installation", req.InstallationID, "attempt", job.Attempts)
	client, err := p.cfg.Credentials.Client(ctx, req.InstallationID)
	if err != nil {
		// Without a client nothing can be said on GitHub; the log has it.
		return fmt.Errorf("GitHub client: %w", err)
	}
	r := &jobRun{
		p:      p,
		job:    job,
		req:    req,
		key:    publish.Key(job.Key),
		client: client,
		start:  time.Now(),
		events: eventLog{store: p.cfg.Store, jobID: job.ID},
	}
	r.secrets = append([]string{}, p.cfg.Secrets...)
	r.masker = agent.NewMasker(r.secrets...)
	r.log = slog.New(&maskHandler{next: log.Handler(), mask: r.mask})
	// The first push of work in progress comes a PushInterval into the job:
	// a short job makes one commit with a meaningful message.
	r.lastPush = r.start
	r.tracker = &publish.Tracker{Client: client, Key: r.key, JobID: job.ID, Mask: r.mask}
	if err := r.tracker.Start(ctx); err != nil {
		r.log.Warn("tracking comment", "err", err)
	}
	runCtx := ctx
	if p.cfg.JobTimeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, p.cfg.JobTimeout, &limitError{reason: jobTimeoutReason(p.cfg.JobTimeout)})
		defer cancel()
	}
	var out result
	if _, err = r.freshToken(runCtx); err == nil {
		out, err = r.run(runCtx)
	}
	return r.finish(ctx, runCtx, out, err)
}

// tokenAttempts bounds the tries to get an installation token.
const tokenAttempts = 3

// freshToken returns the installation token, renewed when it nears its
// expiry (a job may outlive the hour a token lives), and masks it.
func (r *jobRun) freshToken(ctx context.Context) (string, error) {
	var err error
	for attempt := range tokenAttempts {
		var tok string
		if tok, err = r.p.cfg.Credentials.Token(ctx, r.req.InstallationID); err == nil {
			r.setToken(tok)
			return tok, nil
		}
		if attempt+1 < tokenAttempts {
			select {
			case <-ctx.Done():
				return "", context.Cause(ctx)
			case <-time.After(time.Duration(attempt+1) * time.Second):
			}
		}
	}
	return "", fmt.Errorf("installation token: %w", err)
}

// setToken records the current token and adds it to the masked secrets.
func (r *jobRun) setToken(tok string) {
	r.maskMu.Lock()
	defer r.maskMu.Unlock()
	r.token = tok
	if !slices.Contains(r.secrets, tok) {
		r.secrets = append(r.secrets, tok)
		r.masker = agent.NewMasker(r.secrets...)
	}
}

// mask hides every secret the job knows of, tokens included.
func (r *jobRun) currentToken() string {
	r.maskMu.Lock()
	defer r.maskMu.Unlock()
	return r.token
}

func (r *jobRun) mask(s string) string {
	r.maskMu.Lock()
	m := r.masker
	r.maskMu.Unlock()
	return m.Mask(s)
}

func jobTimeoutReason(d time.Duration) string {
	return fmt.Sprintf("stopped after %s of wall-clock time (runner.job_timeout)", publish.FormatDuration(d))
}

// limitError is a job stopped by a budget: iterations, tokens, wall clock,
// or an agent that got stuck.
type limitError struct{ reason string }

func (e *limitError) Error() string { return e.reason }

// userError is a job that cannot proceed, explained in words for people.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

// jobRun is one execution of a job.
type jobRun struct {
	p      *Pipeline
	job    *Job
	req    Request
	key    publish.Key
	client *github.Client
	log    *slog.Logger

	maskMu  sync.Mutex
	token   string // the current installation token (see freshToken)
	secrets []string
	masker  *agent.Masker
	start   time.Time
	events  eventLog
	tracker *publish.Tracker

	title       string               // the issue's or PR's title
	fixes       int                  // the issue a new PR closes
	fork        *publish.PullRequest // a fork's PR answered with a new PR
	startRef    string               // where a new branch starts, if not the base
	branch      string
	ws          *gitrepo.Workspace
	sb          sandbox.Sandbox
	skillSet    skills.Set
	notIsolated bool
	notes       []string // for the tracking comment (see publish.Status.Notes)
	setupNote   string
	tasks       []publish.Task
	tests       []publish.TestRun
	lastPush    time.Time
	pushed      bool // this run pushed commits
	unpushed    bool // a commit waits for a push that failed
}

// result is what a job produced, for its final word.
type result struct {
	agent    agent.Result
	prNumber int
	prURL    string
	created  bool
	answer   string // a reply given instead of a code change
}

func (r *jobRun) status(ctx context.Context, phase publish.Phase, step string) {
	err := r.tracker.Update(ctx, publish.Status{
		Phase:       phase,
		Step:        step,
		Tasks:       r.tasks,
		Elapsed:     time.Since(r.start),
		Requester:   r.req.Requester,
		NotIsolated: r.notIsolated,
		Notes:       r.notes,
	})
	if err != nil && ctx.Err() == nil {
		r.log.Warn("update tracking comment", "err", err)
	}
}

func (r *jobRun) run(ctx context.Context) (result, error) {
	var out result
	r.status(ctx, publish.PhasePreparing, "")
	repo, _, err := r.client.Repositories.Get(ctx, r.key.Owner, r.key.Repo)
	if err != nil {
		return out, fmt.Errorf("read repository %s/%s: %w", r.key.Owner, r.key.Repo, err)
	}
	base := repo.GetDefaultBranch()
	var task taskText
	if r.req.IsPullRequest {
		pr, err := publish.LoadPullRequest(ctx, r.client, r.key)
		if err != nil {
			return out, err
		}
		if pr.State != "" && pr.State != "open" {
			return out, &userError{fmt.Sprintf("This pull request is %s; reopen it, or ask me on an issue.", pr.State)}
		}
		r.branch, base = pr.HeadRef, pr.BaseRef
		if pr.IsFork {
			if !r.p.cfg.ForkNewPR {
				return out, &userError{fmt.Sprintf("This pull request's branch lives in the fork `%s`, which I cannot push to. "+
					"Ask me on an issue instead (mention %s there, or add the `%s` label) and I will open a pull request from a branch of this repository, "+
					"or have gohands configured with `runner.fork_prs: new_pr` to get a new pull request built on this one.",
					pr.HeadRepo, r.p.cfg.Bot.Mention(), r.p.cfg.Bot.Label)}
			}
			r.fork = pr
			r.branch = fmt.Sprintf("%spr-%d", r.p.cfg.Bot.BranchPrefix, r.key.Number)
			r.startRef = fmt.Sprintf("refs/pull/%d/head", r.key.Number)
		}
		task = r.prTask(pr)
	} else {
		issue, err := publish.LoadIssue(ctx, r.client, r.key)
		if err != nil {
			return out, err
		}
		r.fixes = r.key.Number
		r.branch = fmt.Sprintf("%sissue-%d", r.p.cfg.Bot.BranchPrefix, r.key.Number)
		task = r.issueTask(issue)
	}
	// An issue's job and a job on its pull request share the branch: one at a time.
	unlock, err := r.p.lockBranch(ctx, r.key.Owner+"/"+r.key.Repo+":"+r.branch)
	if err != nil {
		return out, err
	}
	defer unlock()
	if err := r.prepare(ctx, repo.GetCloneURL(), base); err != nil {
		return out, err
	}
	defer r.cleanup()
	return r.work(ctx, task)
}

// prepare makes the working tree on the job's branch, starts the sandbox
// with the workspace copied in, and runs the repository's setup script.
func (r *jobRun) prepare(ctx context.Context, cloneURL, base string) error {
	cache, err := r.p.gitCache()
	if err != nil {
		return err
	}
	workDir := filepath.Join(r.p.cfg.StoreDir, "work", r.job.ID)
	if err := os.RemoveAll(workDir); err != nil {
		return fmt.Errorf("clear working tree %s: %w", workDir, err)
	}
	token, err := r.freshToken(ctx)
	if err != nil {
		return err
	}
	ws, err := cache.Prepare(ctx, gitrepo.PrepareOptions{CloneURL: cloneURL, Token: token, Branch: r.branch, BaseBranch: base, Dir: workDir, StartRef: r.startRef})
	if err != nil {
		return fmt.Errorf("prepare %s: %w", r.branch, err)
	}
	r.ws = ws
	var warnings []skills.Warning
	r.skillSet, warnings = skills.Load(ws.Dir)
	for _, w := range warnings {
		r.log.Warn("skill skipped", "warning", w.String())
		r.events.note(ctx, "warning", w.String())
	}
	spec := r.p.cfg.Sandbox
	spec.JobID = r.job.ID
	spec.Labels = map[string]string{"gohands.key": r.job.Key.String()}
	sb, err := r.p.cfg.Driver.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	r.sb = sb
	r.notIsolated = !sb.Isolated()
	if err := sb.CopyIn(ctx, ws.Dir); err != nil {
		return fmt.Errorf("copy the workspace into the sandbox: %w", err)
	}
	ran, res, err := sandbox.RunSetup(ctx, sb, r.p.cfg.SetupTimeout)
	if ran {
		r.events.note(ctx, "setup", r.mask(res.Output))
	}
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		r.setupNote = fmt.Sprintf("`%s` failed: %v", sandbox.SetupScript, err)
		r.log.Warn("setup script failed", "err", err)
	}
	return nil
}

func (r *jobRun) cleanup() {
	if r.sb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		if err := r.sb.Close(ctx); err != nil {
			r.log.Warn("remove sandbox", "err", err)
		}
		cancel()
	}
	if r.ws != nil {
		if err := os.RemoveAll(r.ws.Dir); err != nil {
			r.log.Warn("remove working tree", "err", err)
		}
	}
}

// work runs the agent and publishes what it did.
func (r *jobRun) work(ctx context.Context, task taskText) (result, error) {
	var out result
	system, err := r.systemPrompt()
	if err != nil {
		return out, err
	}
	user, err := task.text(r.ws)
	if err != nil {
		return out, err
	}
	if r.setupNote != "" {
		user += "\n\nNote: the repository's setup script failed; its output is in the job log. " + r.setupNote
	}
	cfg := agent.Config{
		BaseURL:       r.p.cfg.LLM.BaseURL,
		APIKey:        r.p.cfg.LLM.APIKey,
		Model:         r.p.cfg.LLM.Model,
		MaxIterations: r.p.cfg.LLM.MaxIterations,
		MaxTokens:     r.p.cfg.LLM.MaxTokens,
		ContextWindow: r.p.cfg.LLM.ContextWindow,
		Secrets:       append(append([]string{}, r.p.cfg.Secrets...), r.currentToken()),
		WallClockKey:  "runner.job_timeout",
		Logger:        r.log,
	}
	if r.p.cfg.JobTimeout > 0 {
		// The agent stops first, leaving time to commit and push.
		cfg.WallClock = r.p.cfg.JobTimeout * 9 / 10
	}
	r.status(ctx, publish.PhaseRunning, "Starting the agent.")
	res, err := agent.Run(ctx, cfg, r.sb, agent.Task{System: system, User: user, Skills: r.skillSet}, r.events, agent.Hooks{
		OnStep: r.onStep,
	})
	out.agent = res
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		var cancelled *CancelledError
		if !errors.As(cause, &cancelled) {
			// A restart or the job's timeout: keep what the agent did on
			// the branch. A person's stop keeps only what was pushed.
			r.saveProgress(ctx, cause)
		}
		return out, cause
	}
	if err != nil {
		r.saveProgress(ctx, err)
		if help, ok := agent.ModelErrorHelp(err); ok {
			r.log.Warn("model request failed", "err", r.mask(err.Error()))
			return out, &userError{help}
		}
		return out, fmt.Errorf("the model failed: %w", err)
	}
	// From here the job commits and publishes: a shutdown that arrives now
	// waits for it (bounded), rather than throwing the agent's work away.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	return r.publish(pctx, out)
}

// publishTimeout bounds committing, pushing and opening the PR at the end.
const publishTimeout = 5 * time.Minute

// onStep reports progress and pushes work in progress now and then.
func (r *jobRun) onStep(ctx context.Context, s agent.Step) error {
	r.tasks = tasksOf(s.Tasks)
	if t, ok := testRunOf(s); ok {
		r.tests = append(r.tests, t)
	}
	r.status(ctx, publish.PhaseRunning, describeStep(s))
	if !s.FilesChanged || time.Since(r.lastPush) < r.p.cfg.PushInterval {
		return nil
	}
	changed, err := r.commitAndPush(ctx, fmt.Sprintf("WIP: %s (gohands, work in progress on #%d)", strings.TrimSuffix(describeStep(s), "."), r.key.Number))
	if err != nil {
		var moved *gitrepo.BranchMovedError
		if errors.As(err, &moved) {
			return r.movedError(moved)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		r.log.Warn("push work in progress", "err", err)
		return nil
	}
	if changed {
		r.log.Info("pushed work in progress", "branch", r.branch)
	}
	return nil
}

// saveProgress commits and pushes what the agent changed when the job
// stops early (a restart, the job's timeout, a failing model), so the
// next run continues from it.
func (r *jobRun) saveProgress(ctx context.Context, why error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	msg := fmt.Sprintf("WIP: work in progress on #%d, interrupted\n\n%s", r.key.Number, r.mask(why.Error()))
	if changed, err := r.commitAndPush(sctx, msg); err != nil {
		r.log.Warn("push work in progress", "err", err)
	} else if changed {
		r.log.Info("pushed work in progress", "branch", r.branch, "why", why)
	}
}

func (r *jobRun) movedError(moved *gitrepo.BranchMovedError) error {
	return &userError{fmt.Sprintf("The branch `%s` moved while I worked, and the new commits touch the same files I changed, so I stopped rather than overwrite them (%v). Comment `%s continue` to start again from the branch's new head.",
		r.branch, moved, r.p.cfg.Bot.Mention())}
}

// commitAndPush copies the sandbox's workspace out, commits what changed
// and pushes the branch, also a commit whose earlier push failed. It
// reports whether a commit was made. When the push merged someone else's
// commits, the merged tree goes back into the sandbox, so the agent works
// on it and the next copy out does not undo them.
func (r *jobRun) commitAndPush(ctx context.Context, message string) (bool, error) {
	if err := r.sb.CopyOut(ctx, r.ws.Dir); err != nil {
		return false, fmt.Errorf("copy changes out of the sandbox: %w", err)
	}
	hash, changed, err := r.ws.Commit(ctx, gitrepo.CommitOptions{
		Message:   message,
		Author:    r.p.botSignature(ctx, r.client),
		CoAuthors: []gitrepo.Signature{r.p.userSignature(ctx, r.client, r.req.Requester)},
	})
	if err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	r.lastPush = time.Now()
	if changed {
		r.unpushed = true
	}
	if !r.unpushed {
		return false, nil
	}
	token, err := r.freshToken(ctx)
	if err != nil {
		return changed, err
	}
	before := r.ws.HeadCommit()
	if err := r.ws.Push(ctx, token); err != nil {
		return changed, fmt.Errorf("push %s: %w", r.branch, err)
	}
	r.unpushed, r.pushed = false, true
	r.events.note(ctx, "push", fmt.Sprintf("pushed %s to %s", r.ws.HeadCommit(), r.branch))
	if r.ws.HeadCommit() != before {
		// Push merged commits someone else had pushed to the branch.
		if err := r.sb.CopyIn(ctx, r.ws.Dir); err != nil {
			return true, fmt.Errorf("bring the merged branch into the sandbox: %w", err)
		}
		r.log.Info("merged commits pushed by someone else", "branch", r.branch, "head", r.ws.HeadCommit(), "ours", hash)
	}
	return true, nil
}

// publish commits the agent's final work and opens or updates the pull
// request, or answers when there is no code change.
func (r *jobRun) publish(ctx context.Context, out result) (result, error) {
	res := out.agent
	if res.Finished {
		ran, pre, err := sandbox.RunPreCommit(ctx, r.sb, r.p.cfg.SetupTimeout)
		if ran {
			r.events.note(ctx, "pre-commit", r.mask(pre.Output))
		}
		if err != nil {
			why := fmt.Errorf("the repository's %s failed: %w", sandbox.PreCommitScript, err)
			r.saveProgress(ctx, why)
			msg := fmt.Sprintf("The repository's `%s` failed (%v), so I did not finish the commit.", sandbox.PreCommitScript, err)
			if r.pushed {
				msg += fmt.Sprintf(" The work in progress is on the branch `%s`.", r.branch)
			}
			return out, &userError{msg}
		}
	}
	r.status(ctx, publish.PhasePushing, "Committing and pushing.")
	message := commitMessage(res, r.key.Number, r.title)
	changed, err := r.commitAndPush(ctx, message)
	if err != nil {
		var moved *gitrepo.BranchMovedError
		if errors.As(err, &moved) {
			return out, r.movedError(moved)
		}
		return out, err
	}
	if !res.Finished {
		return out, &limitError{reason: res.Reason}
	}
	newWork := changed || r.pushed
	switch {
	case r.fork != nil && newWork, !r.req.IsPullRequest && newWork:
		return r.ensurePR(ctx, out)
	case !r.req.IsPullRequest && len(r.ws.BranchCommits) > 0:
		// The branch holds an earlier run's work (a crash, a limit): open
		// its PR if there is none; an open PR is left as it is.
		n, _, err := publish.FindPullRequest(ctx, r.client, r.key, r.branch)
		if err != nil {
			return out, err
		}
		if n == 0 {
			return r.ensurePR(ctx, out)
		}
		out.answer = res.Message
		return out, nil
	case r.req.IsPullRequest && newWork:
		out.prNumber = r.key.Number
		if r.req.ReviewCommentID != 0 {
			msg := fmt.Sprintf("%s\n\nPushed to `%s` (%s).", res.Message, r.branch, r.ws.HeadCommit())
			if _, err := publish.Reply(ctx, r.client, r.key, publish.ReplyTarget{ReviewCommentID: r.req.ReviewCommentID}, msg, r.mask); err != nil {
				return out, fmt.Errorf("reply in the review thread: %w", err)
			}
		}
	default:
		// Nothing to commit: the job was a question, or needed no change.
		out.answer = res.Message
		if r.req.ReviewCommentID != 0 {
			if _, err := publish.Reply(ctx, r.client, r.key, publish.ReplyTarget{ReviewCommentID: r.req.ReviewCommentID}, res.Message, r.mask); err != nil {
				return out, fmt.Errorf("reply in the review thread: %w", err)
			}
		}
	}
	return out, nil
}

// ensurePR opens the pull request for the job's branch, or updates it.
func (r *jobRun) ensurePR(ctx context.Context, out result) (result, error) {
	res := out.agent
	changes, err := r.ws.Changes(ctx)
	if err != nil {
		return out, fmt.Errorf("diff stat: %w", err)
	}
	body := publish.RenderPRBody(publish.PRBody{
		JobID:     r.job.ID,
		Summary:   res.Message,
		Fixes:     r.fixes,
		Changes:   fileChanges(changes),
		Tests:     r.tests,
		Cost:      r.cost(res),
		Requester: r.req.Requester,
	})
	title := r.title
	if r.fork != nil {
		title = fmt.Sprintf("%s (follow-up to #%d)", r.title, r.key.Number)
		body = fmt.Sprintf("Builds on #%d from the fork `%s`, which I cannot push to.\n\n%s", r.key.Number, r.fork.HeadRepo, body)
	}
	out.prNumber, out.prURL, out.created, err = publish.EnsurePullRequest(ctx, r.client, publish.PRSpec{
		Key: r.key, Head: r.branch, Base: r.ws.BaseBranch, Title: title, Body: body,
		Draft: r.p.cfg.Bot.Draft, Reviewer: r.req.Requester, Mask: r.mask,
	})
	if err != nil {
		return out, fmt.Errorf("open the pull request: %w", err)
	}
	return out, nil
}

func (r *jobRun) cost(res agent.Result) publish.Cost {
	return publish.Cost{
		Iterations:       res.Iterations,
		PromptTokens:     int64(res.PromptTokens),
		CompletionTokens: int64(res.CompletionTokens),
		Wall:             time.Since(r.start),
		Model:            r.p.cfg.LLM.Model,
	}
}

// finish writes the job's final word: the tracking comment's outcome and a
// reaction on what triggered it. ctx is the queue's context (cancel,
// shutdown); runCtx adds the job's own timeout.
func (r *jobRun) finish(ctx, runCtx context.Context, out result, err error) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	o := publish.Outcome{
		Mention:     r.p.cfg.Bot.Mention(),
		Branch:      r.branchWithWork(),
		Tasks:       r.tasks,
		Elapsed:     time.Since(r.start),
		Requester:   r.req.Requester,
		NotIsolated: r.notIsolated,
		Notes:       r.notes,
	}
	// A job that got its work done is done, whatever arrived meanwhile.
	cause := context.Cause(ctx)
	var cancelled *CancelledError
	switch {
	case err == nil:
	case errors.As(cause, &cancelled):
		o.Kind, o.CancelledBy = publish.OutcomeCancelled, cancelled.By
		r.finishComment(fctx, o)
		return cause
	case errors.Is(cause, ErrShutdown):
		r.status(fctx, publish.PhaseQueued, "gohands is restarting; this job will continue from its branch when it is back.")
		return cause
	}
	if err != nil {
		o.Kind = publish.OutcomeFailed
		var limit *limitError
		var uerr *userError
		switch {
		case errors.As(err, &limit):
			o.Limit = limit.reason
			o.Failure = "The agent stopped before it finished."
			if r.pushed || (r.ws != nil && len(r.ws.BranchCommits) > 0) {
				o.Failure += fmt.Sprintf(" What it did so far is on the branch `%s`.", r.branch)
			}
		case errors.As(err, &uerr):
			o.Failure = uerr.msg
		default:
			o.Failure = "Something went wrong: " + err.Error()
			if help, ok := accessHelp(err); ok {
				o.Failure = help + "\n\n(" + err.Error() + ")"
			}
		}
		r.log.Warn("job failed", "err", err)
		r.finishComment(fctx, o)
		r.react(fctx, "confused")
		return errors.New(r.mask(err.Error()))
	}
	o.Kind = publish.OutcomeSucceeded
	o.PRNumber, o.PRURL, o.PRCreated = out.prNumber, out.prURL, out.created
	o.Summary = out.agent.Message
	r.job.PullRequest = out.prNumber
	r.finishComment(fctx, o)
	r.react(fctx, "rocket")
	return nil
}

// accessHelp says what to check when GitHub refuses gohands' git or API
// access, which is most often a permission of the App.
func accessHelp(err error) (string, bool) {
	var ghErr *github.ErrorResponse
	switch {
	case errors.As(err, &ghErr) && ghErr.Response != nil && ghErr.Response.Request != nil &&
		ghErr.Response.StatusCode == http.StatusForbidden && strings.Contains(ghErr.Message, "not accessible by integration"):
		req := ghErr.Response.Request
		return fmt.Sprintf("GitHub refused the App a call it needs (`%s %s`): the App lacks a permission. It needs %s; "+
			"check the App's permissions, and accept the updated permissions in the installation if GitHub asks.",
			req.Method, req.URL.Path, permissionFor(req.URL.Path)), true
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return "GitHub refused my git access to this repository. The App needs the **Contents: Read and write** permission: " +
			"check it in the App's settings, and accept the updated permissions in the installation if GitHub asks. " +
			"A branch protection rule or ruleset that matches my branch refuses pushes too.", true
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return "GitHub did not accept the App's installation token for git. Check `github.app.integration_id` and " +
			"`github.app.private_key`, and that the App is still installed on this repository.", true
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return "GitHub says this repository does not exist for the App: check that the installation has access to it.", true
	}
	return "", false
}

// permissionFor names the App permission a REST path needs.
func permissionFor(path string) string {
	switch {
	case strings.Contains(path, "/pulls"):
		return "**Pull requests: Read and write**"
	case strings.Contains(path, "/issues"):
		return "**Issues: Read and write**"
	case strings.Contains(path, "/contents") || strings.Contains(path, "/git/"):
		return "**Contents: Read and write**"
	}
	return "the permissions listed in `deploy/app-manifest.yml`"
}

// branchWithWork is the job's branch when it holds work (pushed now or
// earlier), for the final word; "" when there is nothing on it.
func (r *jobRun) branchWithWork() string {
	if r.pushed || (r.ws != nil && r.ws.Resumed) {
		return r.branch
	}
	return ""
}

func (r *jobRun) finishComment(ctx context.Context, o publish.Outcome) {
	if err := r.tracker.Finish(ctx, o); err != nil {
		r.log.Warn("final tracking comment", "err", err)
	}
}

// react puts a reaction on what triggered the latest request.
func (r *jobRun) react(ctx context.Context, content string) {
	t := publish.TriggerTarget(r.req.CommentID, r.req.ReviewCommentID)
	if err := publish.React(ctx, r.client, r.key, t, content); err != nil {
		r.log.Warn("reaction", "content", content, "err", err)
	}
}

// lockBranch waits until no other job of this process works on the
// branch, and returns the function that lets the next one in.
func (p *Pipeline) lockBranch(ctx context.Context, branch string) (func(), error) {
	p.lockMu.Lock()
	ch, ok := p.branchLocks[strings.ToLower(branch)]
	if !ok {
		ch = make(chan struct{}, 1)
		p.branchLocks[strings.ToLower(branch)] = ch
	}
	p.lockMu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (p *Pipeline) gitCache() (*gitrepo.Cache, error) {
	p.cacheOnce.Do(func() {
		p.cache, p.cacheErr = gitrepo.NewCache(filepath.Join(p.cfg.StoreDir, "repos"))
	})
	return p.cache, p.cacheErr
}

// userSignature is a GitHub user as a commit signature, with the noreply
// address GitHub attributes to the account.
func (p *Pipeline) userSignature(ctx context.Context, client *github.Client, login string) gitrepo.Signature {
	id := p.userID(ctx, client, login)
	email := login + "@users.noreply.github.com"
	if id > 0 {
		email = fmt.Sprintf("%d+%s@users.noreply.github.com", id, login)
	}
	return gitrepo.Signature{Name: login, Email: email}
}

func (p *Pipeline) botSignature(ctx context.Context, client *github.Client) gitrepo.Signature {
	return p.userSignature(ctx, client, p.cfg.Bot.Login)
}

// userID looks a login's numeric id up once per process; 0 when GitHub
// does not say.
func (p *Pipeline) userID(ctx context.Context, client *github.Client, login string) int64 {
	p.idMu.Lock()
	id, ok := p.userIDs[login]
	p.idMu.Unlock()
	if ok {
		return id
	}
	u, _, err := client.Users.Get(ctx, login)
	if err != nil {
		p.log.Debug("user id lookup", "login", login, "err", err)
		return 0
	}
	p.idMu.Lock()
	p.userIDs[login] = u.GetID()
	p.idMu.Unlock()
	return u.GetID()
}

// eventLog appends a job's events to the store.
type eventLog struct {
	store *Store
	jobID string
}

// Append implements agent.EventLog.
func (l eventLog) Append(ctx context.Context, e agent.Event) error {
	if l.store == nil {
		return nil
	}
	return l.store.AppendEvent(ctx, l.jobID, e)
}

// note logs a pipeline event (setup output, a push, a warning).
func (l eventLog) note(ctx context.Context, kind, content string) {
	_ = l.Append(ctx, agent.Event{Time: time.Now().UTC(), Kind: kind, Content: content})
}

func commitMessage(res agent.Result, number int, title string) string {
	subject := ""
	if res.Finished {
		subject = strings.TrimSpace(firstLine(strings.TrimLeft(res.Message, "# ")))
	}
	if subject == "" || len(subject) > 72 {
		subject = fmt.Sprintf("Address #%d: %s", number, title)
	}
	if len(subject) > 72 {
		subject = subject[:69] + "..."
	}
	if !res.Finished {
		subject = "WIP: " + strings.TrimPrefix(subject, "WIP: ")
		return subject + "\n\n" + res.Reason
	}
	return subject + "\n\n" + strings.TrimSpace(res.Message)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func fileChanges(cs []gitrepo.FileChange) []publish.FileChange {
	out := make([]publish.FileChange, 0, len(cs))
	for _, c := range cs {
		out = append(out, publish.FileChange{Path: c.Path, Added: c.Added, Deleted: c.Deleted, Status: c.Action})
	}
	return out
}

func tasksOf(items []agent.TaskItem) []publish.Task {
	out := make([]publish.Task, 0, len(items))
	for _, it := range items {
		out = append(out, publish.Task{Title: it.Title, Status: publish.TaskStatus(it.Status)})
	}
	return out
}
