package handlers

import (
	"context"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/runner"
)

// PullRequestReview handles @-mentions in the body of a submitted review:
// the job addresses the review's comments on the PR's branch.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request_review
type PullRequestReview struct{ Base }

var _ githubapp.EventHandler = (*PullRequestReview)(nil)

// Handles lists the events this handler handles.
func (h *PullRequestReview) Handles() []string { return []string{"pull_request_review"} }

// Handle handles one pull_request_review event.
func (h *PullRequestReview) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev reviewEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != "submitted" || h.isBot(ev.Review.User) || h.isBot(ev.Sender) {
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev.envelope, ev.PullRequest.Number, runner.TriggerReview, ev.Review.User)
	if err != nil {
		return err
	}
	req.IsPullRequest = true
	req.Seen = seen(ev.PullRequest.Title, ev.PullRequest.Body)
	req.ReviewID = ev.Review.ID
	// A review has no reaction API of its own; the 👀 goes on the PR.
	return h.command(ctx, req.InstallationID, req, ev.Review.Body, ack{})
}
