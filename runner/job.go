// Package runner owns the durable job queue and the job pipeline that turns
// a request into a branch, a pull request and a tracking comment.
package runner

import (
	"fmt"
	"time"
)

// Key identifies the issue or pull request a job works on. At most one job
// runs per key.
type Key struct {
	Owner  string `json:"owner"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

// String formats the key as owner/repo#number.
func (k Key) String() string { return fmt.Sprintf("%s/%s#%d", k.Owner, k.Repo, k.Number) }

// Trigger says what started a request.
type Trigger string

// The triggers gohands knows.
const (
	TriggerLabel         Trigger = "label"
	TriggerAssign        Trigger = "assign"
	TriggerComment       Trigger = "comment"        // issue or PR conversation comment
	TriggerReviewComment Trigger = "review_comment" // inline PR review comment
	TriggerReview        Trigger = "review"         // submitted PR review
	TriggerDispatch      Trigger = "dispatch"       // workflow_dispatch / repository_dispatch
)

// Request is one person's ask, as the handlers understood it from a webhook.
// Several requests for a busy key are coalesced into one follow-up job.
type Request struct {
	Key            Key     `json:"key"`
	DeliveryID     string  `json:"delivery_id"`
	InstallationID int64   `json:"installation_id"`
	Trigger        Trigger `json:"trigger"`
	// IsPullRequest is set when Key.Number is a pull request.
	IsPullRequest bool `json:"is_pull_request"`
	// Requester is the login of the person who asked; checked for write access.
	Requester string `json:"requester"`
	// Instruction is the free text of the ask (comment text after the mention,
	// or the dispatch prompt); empty for labels and assignments.
	Instruction string `json:"instruction,omitempty"`
	// CommentID is the triggering issue comment, for reactions.
	CommentID int64 `json:"comment_id,omitempty"`
	// ReviewCommentID is the triggering inline review comment: the answer
	// goes into its thread.
	ReviewCommentID int64 `json:"review_comment_id,omitempty"`
	// ReviewID is the triggering pull request review.
	ReviewID   int64     `json:"review_id,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// Seen is the or pull request's title and body as the webhook
	// showed them when the person asked; nil when the event carried none
	// (a dispatch).
	Seen *Seen `json:"seen,omitempty"`
}

// Seen is the text of an issue or pull request at one moment.
type Seen struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// State is where a job is in its life.
type State string

// Job states.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// Done reports whether the state is final.
func (s State) Done() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// Job is the unit of work for one key: one or more coalesced requests.
type Job struct {
	ID       string    `json:"id"`
	Key      Key       `json:"key"`
	Requests []Request `json:"requests"`
	State    State     `json:"state"`
	// Reason says why a job failed or was cancelled, in words for people.
	Reason string `json:"reason,omitempty"`
	// Attempts counts starts; more than one means it was resumed after a crash.
	Attempts   int       `json:"attempts"`
	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// PullRequest is the number of the PR the job opened or updated, if any.
	PullRequest int `json:"pull_request,omitempty"`
}

// Latest returns the most recent request of the job.
func (j *Job) Latest() Request { return j.Requests[len(j.Requests)-1] }
