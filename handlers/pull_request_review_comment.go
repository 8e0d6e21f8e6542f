package handlers

import (
	"context"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/runner"
)

// PullRequestReviewComment handles @-mentions in inline review comments: the
// job works on the PR's branch and answers in the comment's thread.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request_review_comment
type PullRequestReviewComment struct{ Base }

var _ githubapp.EventHandler = (*PullRequestReviewComment)(nil)

// Handles lists the events this handler handles.
func (h *PullRequestReviewComment) Handles() []string {
	return []string{"pull_request_review_comment"}
}

// Handle handles one pull_request_review_comment event.
func (h *PullRequestReviewComment) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev reviewCommentEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != "created" || h.isBot(ev.Comment.User) || h.isBot(ev.Sender) {
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev.envelope, ev.PullRequest.Number, runner.TriggerReviewComment, ev.Comment.User)
	if err != nil {
		return err
	}
	req.IsPullRequest = true
	req.Seen = seen(ev.PullRequest.Title, ev.PullRequest.Body)
	req.ReviewCommentID = ev.Comment.ID
	req.ReviewID = ev.Comment.PullRequestReviewID
	return h.command(ctx, req.InstallationID, req, ev.Comment.Body, ack{ReviewComment: req.ReviewCommentID})
}
