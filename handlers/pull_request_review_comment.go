package handlers

import (
	"context"

	"github.com/google/go-github/v66/github"
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
	var ev github.PullRequestReviewCommentEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.GetAction() != "created" || h.isBot(ev.GetComment().GetUser()) || h.isBot(ev.GetSender()) {
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev.GetRepo(), ev.GetPullRequest().GetNumber(), ev.GetInstallation(), runner.TriggerReviewComment, ev.GetComment().GetUser())
	if err != nil {
		return err
	}
	req.IsPullRequest = true
	req.ReviewCommentID = ev.GetComment().GetID()
	req.ReviewID = ev.GetComment().GetPullRequestReviewID()
	return h.command(ctx, req.InstallationID, req, ev.GetComment().GetBody(), ack{ReviewComment: req.ReviewCommentID})
}
