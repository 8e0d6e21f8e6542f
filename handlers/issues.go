package handlers

import (
	"context"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/runner"
)

// Issues starts a job when an issue is labeled with the bot's label or
// assigned to the bot, and cancels it when the label is removed.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#issues
type Issues struct{ Base }

var _ githubapp.EventHandler = (*Issues)(nil)

// Handles lists the events this handler handles.
func (h *Issues) Handles() []string { return []string{"issues"} }

// Handle handles one issues event.
func (h *Issues) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev issuesEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	var trigger runner.Trigger
	switch ev.Action {
	case "labeled", "unlabeled":
		if !strings.EqualFold(ev.Label.Name, h.Label) {
			return nil
		}
		trigger = runner.TriggerLabel
	case "assigned":
		if !strings.EqualFold(ev.Assignee.Login, h.Bot.Login) {
			return nil
		}
		trigger = runner.TriggerAssign
	default:
		return nil
	}
	if h.isBot(ev.Sender) {
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev.envelope, ev.Issue.Number, trigger, ev.Sender)
	if err != nil {
		return err
	}
	req.IsPullRequest = ev.Issue.isPullRequest()
	req.Seen = seen(ev.Issue.Title, ev.Issue.Body)
	client, err := h.client(ctx, req.InstallationID)
	if err != nil {
		return err
	}
	if ev.Action == "unlabeled" {
		return h.stop(ctx, client, req, ack{})
	}
	return h.submit(ctx, client, req, ack{})
}
