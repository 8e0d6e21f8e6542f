package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// PRSpec is the pull request a job wants for its branch.
type PRSpec struct {
	// Key is the issue or PR the job works on; the PR is opened in Key.Owner/Key.Repo.
	Key   Key
	Head  string // branch in the same repository
	Base  string
	Title string
	Body  string
	Draft bool
	// Reviewer is the login of the person who asked; asked to review unless they are the PR's author.
	Reviewer string
	// Mask hides secrets in the title and body.
	Mask Masker
}

// EnsurePullRequest opens the pull request for spec.Head, or, when one is
// already open for that branch, updates its title and body. Whatever the
// races, there is one PR per branch. A failure to request a review is logged,
// not returned.
func EnsurePullRequest(ctx context.Context, client *github.Client, spec PRSpec) (number int, url string, created bool, err error) {
	switch {
	case spec.Head == "":
		return 0, "", false, fmt.Errorf("pull request for %s: empty head branch", spec.Key)
	case spec.Base == "":
		return 0, "", false, fmt.Errorf("pull request for %s: empty base branch", spec.Key)
	case strings.TrimSpace(spec.Title) == "":
		return 0, "", false, fmt.Errorf("pull request for %s: empty title", spec.Key)
	}
	title, body := spec.Mask.apply(spec.Title), spec.Mask.apply(spec.Body)
	pr, err := findOpenPR(ctx, client, spec)
	if err != nil {
		return 0, "", false, err
	}
	if pr == nil {
		pr, _, err = client.PullRequests.Create(ctx, spec.Key.Owner, spec.Key.Repo, &github.NewPullRequest{
			Title: github.String(title), Head: github.String(spec.Head), Base: github.String(spec.Base),
			Body: github.String(body), Draft: github.Bool(spec.Draft), MaintainerCanModify: github.Bool(true),
		})
		created = err == nil
		if err != nil && alreadyExists(err) {
			// Another attempt opened it between our lookup and our create.
			if pr, err = findOpenPR(ctx, client, spec); err == nil && pr == nil {
				err = fmt.Errorf("GitHub says a pull request exists for %s but none is open", spec.Head)
			}
		}
		if err != nil {
			return 0, "", false, fmt.Errorf("open pull request for %s from %s: %w", spec.Key, spec.Head, err)
		}
	}
	if !created && (pr.GetTitle() != title || pr.GetBody() != body) {
		pr, _, err = client.PullRequests.Edit(ctx, spec.Key.Owner, spec.Key.Repo, pr.GetNumber(),
			&github.PullRequest{Title: github.String(title), Body: github.String(body)})
		if err != nil {
			return 0, "", false, fmt.Errorf("update pull request for %s from %s: %w", spec.Key, spec.Head, err)
		}
	}
	requestReview(ctx, client, spec, pr)
	return pr.GetNumber(), pr.GetHTMLURL(), created, nil
}

// FindPullRequest returns the open pull request from head in key's
// repository: its number and URL, or 0 when there is none.
func FindPullRequest(ctx context.Context, client *github.Client, key Key, head string) (number int, url string, err error) {
	pr, err := findOpenPR(ctx, client, PRSpec{Key: key, Head: head})
	if err != nil || pr == nil {
		return 0, "", err
	}
	return pr.GetNumber(), pr.GetHTMLURL(), nil
}

func findOpenPR(ctx context.Context, client *github.Client, spec PRSpec) (*github.PullRequest, error) {
	prs, _, err := withRetry(ctx, DefaultBackoff, func() ([]*github.PullRequest, *github.Response, error) {
		return client.PullRequests.List(ctx, spec.Key.Owner, spec.Key.Repo, &github.PullRequestListOptions{
			State: "open", Head: spec.Key.Owner + ":" + spec.Head, ListOptions: github.ListOptions{PerPage: 100}})
	})
	if err != nil {
		return nil, fmt.Errorf("look up pull request for %s from %s: %w", spec.Key, spec.Head, err)
	}
	for _, pr := range prs {
		if pr.GetHead().GetRef() == spec.Head {
			return pr, nil
		}
	}
	return nil, nil
}

// alreadyExists reports GitHub's 422 "A pull request already exists for owner:branch."
func alreadyExists(err error) bool {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusUnprocessableEntity {
		return false
	}
	for _, e := range er.Errors {
		if strings.Contains(e.Message, "already exists") {
			return true
		}
	}
	return strings.Contains(er.Message, "already exists")
}

func requestReview(ctx context.Context, client *github.Client, spec PRSpec, pr *github.PullRequest) {
	r := spec.Reviewer
	if r == "" || strings.EqualFold(r, pr.GetUser().GetLogin()) {
		return
	}
	for _, u := range pr.RequestedReviewers {
		if strings.EqualFold(u.GetLogin(), r) {
			return
		}
	}
	_, _, err := client.PullRequests.RequestReviewers(ctx, spec.Key.Owner, spec.Key.Repo, pr.GetNumber(),
		github.ReviewersRequest{Reviewers: []string{r}})
	if err != nil {
		slog.WarnContext(ctx, "request review", "pr", pr.GetNumber(), "reviewer", r, "key", spec.Key.String(), "err", err)
	}
}

// FileChange is one file of a job's diff.
type FileChange struct {
	Path    string
	Added   int
	Deleted int
	// Status is added, modified, deleted or renamed ("modified" when empty).
	Status string
}

// TestRun is a test command the agent ran.
type TestRun struct {
	Command  string
	ExitCode int
}

// Cost is what a job spent.
type Cost struct {
	Iterations       int
	PromptTokens     int64
	CompletionTokens int64
	Wall             time.Duration
	Model            string
}

// PRBody is the content of a pull request description written by gohands.
type PRBody struct {
	JobID string
	// Summary is the agent's finish message: what changed and why.
	Summary string
	// Fixes is the issue the PR closes (a "Fixes #N" line); 0 for none.
	Fixes     int
	Changes   []FileChange
	Tests     []TestRun
	Cost      Cost
	Requester string
}

// RenderPRBody renders a pull request description. It is pure: same input, same text.
func RenderPRBody(p PRBody) string {
	var b strings.Builder
	summary := strings.TrimSpace(p.Summary)
	if summary == "" {
		summary = "_The agent left no summary._"
	}
	b.WriteString(summary + "\n")
	if p.Fixes > 0 {
		fmt.Fprintf(&b, "\nFixes #%d\n", p.Fixes)
	}
	if len(p.Changes) > 0 {
		b.WriteString("\n### Changes\n\n| File | | + | − |\n| --- | --- | ---: | ---: |\n")
		added, deleted := 0, 0
		for _, c := range p.Changes {
			st := c.Status
			if st == "" {
				st = "modified"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %d | %d |\n", strings.ReplaceAll(c.Path, "|", `\|`), st, c.Added, c.Deleted)
			added += c.Added
			deleted += c.Deleted
		}
		files := "files"
		if len(p.Changes) == 1 {
			files = "file"
		}
		fmt.Fprintf(&b, "\n%d %s changed, +%d −%d\n", len(p.Changes), files, added, deleted)
	}
	if len(p.Tests) > 0 {
		b.WriteString("\n### Tests run\n\n")
		for _, t := range p.Tests {
			verdict := "passed"
			if t.ExitCode != 0 {
				verdict = fmt.Sprintf("failed (exit %d)", t.ExitCode)
			}
			fmt.Fprintf(&b, "- `%s` — %s\n", oneLine(t.Command), verdict)
		}
	}
	if cost := renderCost(p.Cost); cost != "" {
		fmt.Fprintf(&b, "\n### Cost\n\n%s\n", cost)
	}
	b.WriteString("\n---\n")
	if p.Requester != "" {
		fmt.Fprintf(&b, "Requested by @%s. ", p.Requester)
	}
	b.WriteString("Written by gohands; review it like any other contribution.\n")
	b.WriteString(Marker(p.JobID) + "\n")
	return b.String()
}

func renderCost(c Cost) string {
	var parts []string
	if c.Iterations > 0 {
		parts = append(parts, fmt.Sprintf("%d iterations", c.Iterations))
	}
	if total := c.PromptTokens + c.CompletionTokens; total > 0 {
		parts = append(parts, fmt.Sprintf("%s tokens (%s prompt, %s completion)",
			thousands(total), thousands(c.PromptTokens), thousands(c.CompletionTokens)))
	}
	if c.Wall > 0 {
		parts = append(parts, FormatDuration(c.Wall))
	}
	if c.Model != "" {
		parts = append(parts, "model `"+c.Model+"`")
	}
	return strings.Join(parts, " · ")
}

// thousands writes n with comma separators: 12,345.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
