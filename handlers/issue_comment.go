package handlers

import (
	"context"

	"github.com/google/go-github/v66/github"
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
	var ev github.IssueCommentEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.GetAction() != "created" || h.isBot(ev.GetComment().GetUser()) || h.isBot(ev.GetSender()) {
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev.GetRepo(), ev.GetIssue().GetNumber(), ev.GetInstallation(), runner.TriggerComment, ev.GetComment().GetUser())
	if err != nil {
		return err
	}
	req.IsPullRequest = ev.GetIssue().IsPullRequest()
	req.CommentID = ev.GetComment().GetID()
	return h.command(ctx, req.InstallationID, req, ev.GetComment().GetBody(), ack{Comment: req.CommentID})
}
