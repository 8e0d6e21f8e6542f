package handlers

import (
	"context"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/runner"
)

// IssueComment handles @-mentions in comments on issues and on pull
// requests' conversations.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#issue_comment
type IssueComment struct{ Base }

var _ githubapp.EventHandler = (*IssueComment)(nil)

// Handles lists the events this handler handles.
func (h *IssueComment) Handles() []string { return []string{"issue_comment"} }

// Handle handles one issue_comment event.
func (h *IssueComment) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev issueCommentEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != "created" || h.isBot(ev.Comment.User) || h.isBot(ev.Sender) {
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev.envelope, ev.Issue.Number, runner.TriggerComment, ev.Comment.User)
	if err != nil {
		return err
	}
	req.IsPullRequest = ev.Issue.isPullRequest()
	req.CommentID = ev.Comment.ID
	req.Seen = seen(ev.Issue.Title, ev.Issue.Body)
	return h.command(ctx, req.InstallationID, req, ev.Comment.Body, ack{Comment: req.CommentID})
}
