package handlers

import (
	"context"

	"github.com/google/go-github/v66/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// Installation logs installations of the App and changes to the
// repositories it may access; it starts nothing.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#installation
type Installation struct{ Base }

var _ githubapp.EventHandler = (*Installation)(nil)

// Handles lists the events this handler handles.
func (h *Installation) Handles() []string {
	return []string{"installation", "installation_repositories"}
}

// Handle logs one installation or installation_repositories event.
func (h *Installation) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev struct {
		Action       string               `json:"action"`
		Installation *github.Installation `json:"installation"`
		Sender       *github.User         `json:"sender"`
		Added        []*github.Repository `json:"repositories_added"`
		Removed      []*github.Repository `json:"repositories_removed"`
		Repositories []*github.Repository `json:"repositories"`
	}
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	h.Logger.InfoContext(ctx, "installation event",
		"event", eventType, "action", ev.Action, "delivery", deliveryID,
		"installation", ev.Installation.GetID(), "account", ev.Installation.GetAccount().GetLogin(),
		"sender", ev.Sender.GetLogin(),
		"repositories", len(ev.Repositories), "added", len(ev.Added), "removed", len(ev.Removed))
	return nil
}
