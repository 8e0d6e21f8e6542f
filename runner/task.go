package runner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gohands/gohands/prompts"
	"github.com/gohands/gohands/runner/agent"
	"github.com/gohands/gohands/runner/gitrepo"
	"github.com/gohands/gohands/runner/publish"
)

// maxReviewComments bounds the review comments put in a PR task.
const maxReviewComments = 50

// taskText renders a job's user message once the working tree says
// whether the branch holds an earlier run's work.
type taskText struct {
	render func(*prompts.Resume) (string, error)
}

func (r *jobRun) repository() string { return r.key.Owner + "/" + r.key.Repo }

// instructions joins the asks of every request the job carries: a job
// coalesced from several comments carries each of them, in order.
func (r *jobRun) instructions() string {
	var parts []string
	for _, q := range r.job.Requests {
		if s := strings.TrimSpace(q.Instruction); s != "" {
			if len(r.job.Requests) > 1 {
				s = fmt.Sprintf("@%s: %s", q.Requester, s)
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// outsider reports whether an issue's or PR's author is outside the
// project: without write access, and not gohands itself, which writes its
// own PRs' descriptions (other bots, which may quote upstream release
// notes, are outsiders).
func (r *jobRun) outsider(author string, authorCanWrite bool) bool {
	return !authorCanWrite && !strings.EqualFold(author, r.p.cfg.Bot.Login)
}

// pinned returns the title and body to give the model. When the author is
// an outsider and the text changed after the webhook of the latest request
// that carried it, the job keeps the text the person who asked had in
// front of them: an outsider's edit made after a maintainer asked is not
// something the maintainer vouched for. A note in the tracking comment says
// so, and how to have the new text read.
func (r *jobRun) pinned(kind, title, body string, outsider bool) (string, string) {
	if !outsider {
		return title, body
	}
	var seen *Seen
	for _, q := range r.job.Requests {
		if q.Seen != nil {
			seen = q.Seen
		}
	}
	if seen == nil || (seen.Title == title && seen.Body == body) {
		return title, body
	}
	r.log.Warn("the text changed after the request, and its author has no write access; using the text as it was when asked", "kind", kind)
	r.notes = append(r.notes, fmt.Sprintf("This %s's title or description changed after I was asked, and its author has no write access, "+
		"so I worked from the text as it was when I was asked. To have me read the new text, ask me again.", kind))
	return seen.Title, seen.Body
}

func (r *jobRun) issueTask(is *publish.Issue) taskText {
	outsider := r.outsider(is.Author, is.AuthorCanWrite)
	title, body := r.pinned("issue", is.Title, is.Body, outsider)
	r.title = title // of the commit and the PR: pinned too
	d := prompts.IssueData{
		Repository:  r.repository(),
		Number:      r.key.Number,
		Title:       title,
		Body:        body,
		Author:      is.Author,
		Outsider:    outsider,
		Labels:      is.Labels,
		Comments:    writersOnly(is.Comments),
		Requester:   r.req.Requester,
		Instruction: r.instructions(),
	}
	return taskText{render: func(res *prompts.Resume) (string, error) {
		d.Resume = res
		return prompts.Issue(d)
	}}
}

func (r *jobRun) prTask(pr *publish.PullRequest) taskText {
	trigger := r.instructions()
	if trigger == "" {
		trigger = "Address the review comments on this pull request."
	}
	outsider := r.outsider(pr.Author, pr.AuthorCanWrite)
	title, body := r.pinned("pull request", pr.Title, pr.Body, outsider)
	r.title = title // of the commits and of a fork's follow-up PR: pinned too
	d := prompts.PRData{
		Repository: r.repository(),
		Number:     r.key.Number,
		Title:      title,
		Body:       body,
		Author:     pr.Author,
		Outsider:   outsider,
		HeadBranch: pr.HeadRef,
		BaseBranch: pr.BaseRef,
		Trigger:    prompts.Comment{Author: r.req.Requester, Body: trigger, CreatedAt: r.req.ReceivedAt},
		Thread:     writersOnly(pr.Comments),
		Requester:  r.req.Requester,
	}
	rcs := pr.ReviewComments
	if len(rcs) > maxReviewComments {
		rcs = rcs[len(rcs)-maxReviewComments:]
	}
	for _, rc := range rcs {
		if !rc.CanWrite || rc.Path == "" {
			continue
		}
		d.ReviewComments = append(d.ReviewComments, prompts.ReviewComment{Author: rc.Author, Body: rc.Body, Path: rc.Path, Line: rc.Line, DiffHunk: rc.DiffHunk})
	}
	return taskText{render: func(res *prompts.Resume) (string, error) {
		d.Resume = res
		return prompts.PullRequest(d)
	}}
}

// text renders the task for the prepared working tree.
func (t taskText) text(ws *gitrepo.Workspace) (string, error) {
	var res *prompts.Resume
	if ws.Resumed && len(ws.BranchCommits) > 0 {
		res = &prompts.Resume{Branch: ws.Branch, Base: ws.BaseBranch, DiffStat: diffStat(ws.BranchChanges)}
		for i := len(ws.BranchCommits) - 1; i >= 0; i-- {
			res.Commits = append(res.Commits, ws.BranchCommits[i].Subject)
		}
	}
	text, err := t.render(res)
	if err != nil {
		return "", fmt.Errorf("render the task: %w", err)
	}
	return text, nil
}

func (r *jobRun) systemPrompt() (string, error) {
	s, err := prompts.System(prompts.SystemData{
		Repository: r.repository(),
		WorkDir:    r.sb.WorkDir(),
		Branch:     r.branch,
		Isolated:   r.sb.Isolated(),
		Image:      r.p.cfg.Sandbox.Image,
		Network:    r.p.cfg.Sandbox.Network != "none",
	})
	if err != nil {
		return "", fmt.Errorf("render the system prompt: %w", err)
	}
	return s, nil
}

func writersOnly(cs []publish.Comment) []prompts.Comment {
	var out []prompts.Comment
	for _, c := range cs {
		if c.CanWrite {
			out = append(out, prompts.Comment{Author: c.Author, Body: c.Body, CreatedAt: c.CreatedAt})
		}
	}
	return out
}

func diffStat(cs []gitrepo.FileChange) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, " %s | +%d -%d (%s)\n", c.Path, c.Added, c.Deleted, c.Action)
	}
	return b.String()
}

// describeStep says in a line what the agent just did, for the tracking comment.
func describeStep(s agent.Step) string {
	args := strings.TrimSpace(firstLine(s.Args))
	if len(args) > 100 {
		args = args[:97] + "..."
	}
	switch s.Tool {
	case "terminal", "execute_bash":
		return "Ran `" + strings.ReplaceAll(args, "`", "'") + "`"
	case "file_editor", "str_replace_editor":
		return "Edited or viewed " + args
	case "task_tracker":
		return "Updated the plan."
	case "think":
		return "Thinking."
	case "finish":
		return "Finishing."
	}
	return "Step " + strconv.Itoa(s.Iteration)
}

var (
	testCommand = regexp.MustCompile(`\b(go test|pytest|python3? -m (pytest|unittest)|npm (run )?test|yarn test|pnpm test|cargo test|make (check|test)|mvn test|gradle test|ctest|rspec|phpunit|tox|(ba)?sh (\./)?test\.sh|\./test\.sh)\b`)
)

// testRunOf recognises a terminal step that ran tests, for the PR body.
func testRunOf(s agent.Step) (publish.TestRun, bool) {
	if s.Tool != "terminal" && s.Tool != "execute_bash" {
		return publish.TestRun{}, false
	}
	cmd := strings.TrimSpace(firstLine(s.Args))
	if !testCommand.MatchString(cmd) {
		return publish.TestRun{}, false
	}
	code, ok := agent.ExitCode(s.Observation)
	if !ok {
		code = -1
	}
	return publish.TestRun{Command: cmd, ExitCode: code}, true
}
