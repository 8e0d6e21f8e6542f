package publish

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// Comment is a conversation comment as a prompt sees it.
type Comment struct {
	ID     int64
	Author string
	Body   string
	// CanWrite says whether the author has write access: text from others is
	// context, not instructions.
	CanWrite  bool
	CreatedAt time.Time
}

// Issue is what a job needs to know about an issue.
type Issue struct {
	Key            Key
	Title          string
	Body           string
	Author         string
	AuthorCanWrite bool
	Labels         []string
	// Comments excludes comments by bots, gohands' own above all.
	Comments []Comment
}

// ReviewComment is an inline pull request review comment.
type ReviewComment struct {
	ID        int64
	Author    string
	CanWrite  bool
	Body      string
	Path      string
	Line      int
	DiffHunk  string
	InReplyTo int64
	ReviewID  int64
	CreatedAt time.Time
}

// PullRequest is what a job needs to know about a pull request.
type PullRequest struct {
	Key            Key
	Title          string
	Body           string
	Author         string
	AuthorCanWrite bool
	State          string
	Draft          bool
	HeadRef        string
	HeadSHA        string
	// HeadRepo is the head repository's "owner/name"; empty when the fork was deleted.
	HeadRepo     string
	HeadCloneURL string
	// IsFork is set when the head is not in the base repository: gohands cannot push there.
	IsFork  bool
	BaseRef string
	// ReviewComments and Comments exclude bots' comments.
	ReviewComments []ReviewComment
	Comments       []Comment
}

// LoadIssue reads an issue (or the conversation of a PR) with its comments,
// marking which authors can write.
func LoadIssue(ctx context.Context, client *github.Client, key Key, opts ...Option) (*Issue, error) {
	o := buildOptions(opts)
	is, _, err := withRetry(ctx, o.backoff, func() (*github.Issue, *github.Response, error) {
		return client.Issues.Get(ctx, key.Owner, key.Repo, key.Number)
	})
	if err != nil {
		return nil, fmt.Errorf("load issue %s: %w", key, err)
	}
	perms := &permCache{client: client, owner: key.Owner, repo: key.Repo, opts: opts, seen: map[string]bool{}}
	out := &Issue{Key: key, Title: is.GetTitle(), Body: is.GetBody(), Author: is.GetUser().GetLogin()}
	for _, l := range is.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	if out.AuthorCanWrite, err = perms.canWrite(ctx, out.Author); err != nil {
		return nil, fmt.Errorf("load issue %s: %w", key, err)
	}
	if out.Comments, err = loadComments(ctx, client, key, o, perms); err != nil {
		return nil, fmt.Errorf("load issue %s: %w", key, err)
	}
	return out, nil
}

func loadComments(ctx context.Context, client *github.Client, key Key, o options, perms *permCache) ([]Comment, error) {
	all, err := listAll(ctx, o.backoff, func(page int) ([]*github.IssueComment, *github.Response, error) {
		return client.Issues.ListComments(ctx, key.Owner, key.Repo, key.Number,
			&github.IssueListCommentsOptions{ListOptions: github.ListOptions{Page: page, PerPage: 100}})
	})
	if err != nil {
		return nil, fmt.Errorf("list comments: %w", err)
	}
	var out []Comment
	for _, c := range all {
		if isBot(c.GetUser()) {
			continue
		}
		w, err := perms.canWrite(ctx, c.GetUser().GetLogin())
		if err != nil {
			return nil, err
		}
		out = append(out, Comment{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: c.GetBody(),
			CanWrite: w, CreatedAt: c.GetCreatedAt().Time})
	}
	return out, nil
}

// LoadPullRequest reads a pull request with its review comments and conversation,
// marking which authors can write.
func LoadPullRequest(ctx context.Context, client *github.Client, key Key, opts ...Option) (*PullRequest, error) {
	o := buildOptions(opts)
	pr, _, err := withRetry(ctx, o.backoff, func() (*github.PullRequest, *github.Response, error) {
		return client.PullRequests.Get(ctx, key.Owner, key.Repo, key.Number)
	})
	if err != nil {
		return nil, fmt.Errorf("load pull request %s: %w", key, err)
	}
	perms := &permCache{client: client, owner: key.Owner, repo: key.Repo, opts: opts, seen: map[string]bool{}}
	head, base := pr.GetHead(), pr.GetBase()
	out := &PullRequest{
		Key: key, Title: pr.GetTitle(), Body: pr.GetBody(), Author: pr.GetUser().GetLogin(),
		State: pr.GetState(), Draft: pr.GetDraft(),
		HeadRef: head.GetRef(), HeadSHA: head.GetSHA(), HeadRepo: head.GetRepo().GetFullName(),
		HeadCloneURL: head.GetRepo().GetCloneURL(), BaseRef: base.GetRef(),
	}
	baseRepo := base.GetRepo().GetFullName()
	if baseRepo == "" {
		baseRepo = key.Owner + "/" + key.Repo
	}
	out.IsFork = head.GetRepo() == nil || !strings.EqualFold(out.HeadRepo, baseRepo)
	if out.AuthorCanWrite, err = perms.canWrite(ctx, out.Author); err != nil {
		return nil, fmt.Errorf("load pull request %s: %w", key, err)
	}
	rcs, err := listAll(ctx, o.backoff, func(page int) ([]*github.PullRequestComment, *github.Response, error) {
		return client.PullRequests.ListComments(ctx, key.Owner, key.Repo, key.Number,
			&github.PullRequestListCommentsOptions{ListOptions: github.ListOptions{Page: page, PerPage: 100}})
	})
	if err != nil {
		return nil, fmt.Errorf("load pull request %s: list review comments: %w", key, err)
	}
	for _, c := range rcs {
		if isBot(c.GetUser()) {
			continue
		}
		w, err := perms.canWrite(ctx, c.GetUser().GetLogin())
		if err != nil {
			return nil, fmt.Errorf("load pull request %s: %w", key, err)
		}
		line := c.GetLine()
		if line == 0 {
			line = c.GetOriginalLine() // outdated comments keep only their original line
		}
		out.ReviewComments = append(out.ReviewComments, ReviewComment{
			ID: c.GetID(), Author: c.GetUser().GetLogin(), CanWrite: w, Body: c.GetBody(), Path: c.GetPath(),
			Line: line, DiffHunk: c.GetDiffHunk(), InReplyTo: c.GetInReplyTo(),
			ReviewID: c.GetPullRequestReviewID(), CreatedAt: c.GetCreatedAt().Time,
		})
	}
	if out.Comments, err = loadComments(ctx, client, key, o, perms); err != nil {
		return nil, fmt.Errorf("load pull request %s: %w", key, err)
	}
	return out, nil
}
