package publish

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"
)

// DefaultUpdateInterval is the least time between two edits of the tracking
// comment within one phase, when Tracker.MinInterval is zero.
const DefaultUpdateInterval = 10 * time.Second

// Tracker keeps the one tracking comment of a job: created (or found again
// after a restart) by Start, edited by Update as work goes on, and given its
// final word by Finish. Safe for use by several goroutines.
type Tracker struct {
	Client *github.Client
	Key    Key
	JobID  string
	// Mask hides secrets in everything the tracker writes.
	Mask Masker
	// MinInterval throttles Update within one phase; DefaultUpdateInterval when zero.
	MinInterval time.Duration

	mu        sync.Mutex
	commentID int64
	url       string
	lastEdit  time.Time
	lastPhase Phase
	lastBody  string
	finished  bool
	searched  bool // FindTracking has run successfully
}

// CommentID returns the tracking comment's id, 0 before Start.
func (t *Tracker) CommentID() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.commentID
}

// URL returns the tracking comment's web address, "" before Start.
func (t *Tracker) URL() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.url
}

// Start creates the tracking comment in the queued phase, or takes over the
// comment a previous attempt of the same job left.
func (t *Tracker) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.JobID == "" {
		return fmt.Errorf("tracking comment on %s: empty job id", t.Key)
	}
	if err := t.find(ctx); err != nil {
		return err
	}
	return t.write(ctx, PhaseQueued, RenderStatus(t.JobID, Status{Phase: PhaseQueued}))
}

// Update shows s. Within a phase it edits at most once per MinInterval and
// skips edits that change nothing; a new phase is shown at once.
func (t *Tracker) Update(ctx context.Context, s Status) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return nil // the final word stays
	}
	interval := t.MinInterval
	if interval == 0 {
		interval = DefaultUpdateInterval
	}
	if s.Phase == t.lastPhase && time.Since(t.lastEdit) < interval {
		return nil
	}
	return t.write(ctx, s.Phase, RenderStatus(t.JobID, s))
}

// Finish writes the job's outcome; it is never throttled.
func (t *Tracker) Finish(ctx context.Context, o Outcome) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.write(ctx, "", RenderOutcome(t.JobID, o)); err != nil {
		return err
	}
	t.finished = true
	return nil
}

// find looks for a comment a previous attempt left, once. It must be called with t.mu held.
func (t *Tracker) find(ctx context.Context) error {
	if t.searched || t.commentID != 0 {
		return nil
	}
	id, url, err := FindTracking(ctx, t.Client, t.Key, t.JobID)
	if err != nil {
		return err
	}
	t.commentID, t.url, t.searched = id, url, true
	return nil
}

// write puts body in the tracking comment, creating the comment if Start
// could not. It must be called with t.mu held.
func (t *Tracker) write(ctx context.Context, phase Phase, body string) error {
	body = t.Mask.apply(body)
	if err := t.find(ctx); err != nil {
		return err
	}
	if body == t.lastBody && t.commentID != 0 {
		return nil
	}
	c := &github.IssueComment{Body: github.String(body)}
	if t.commentID == 0 {
		got, _, err := t.Client.Issues.CreateComment(ctx, t.Key.Owner, t.Key.Repo, t.Key.Number, c)
		if err != nil {
			return fmt.Errorf("create tracking comment on %s: %w", t.Key, err)
		}
		t.commentID, t.url = got.GetID(), got.GetHTMLURL()
	} else if _, _, err := t.Client.Issues.EditComment(ctx, t.Key.Owner, t.Key.Repo, t.commentID, c); err != nil {
		return fmt.Errorf("edit tracking comment %d on %s: %w", t.commentID, t.Key, err)
	}
	t.lastEdit, t.lastPhase, t.lastBody = time.Now(), phase, body
	return nil
}

// FindTracking looks for the tracking comment of jobID on key, written by a
// bot, and returns its id and URL; id 0 when there is none.
func FindTracking(ctx context.Context, client *github.Client, key Key, jobID string) (int64, string, error) {
	marker := Marker(jobID)
	all, err := listAll(ctx, DefaultBackoff, func(page int) ([]*github.IssueComment, *github.Response, error) {
		return client.Issues.ListComments(ctx, key.Owner, key.Repo, key.Number,
			&github.IssueListCommentsOptions{ListOptions: github.ListOptions{Page: page, PerPage: 100}})
	})
	if err != nil {
		return 0, "", fmt.Errorf("find tracking comment of job %s on %s: %w", jobID, key, err)
	}
	for _, c := range all {
		// Only a bot's comment can be ours: a person quoting the marker must not capture the job.
		if isBot(c.GetUser()) && strings.Contains(c.GetBody(), marker) {
			return c.GetID(), c.GetHTMLURL(), nil
		}
	}
	return 0, "", nil
}
