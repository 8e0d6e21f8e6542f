package handlers

import (
	"context"

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
	var ev installationEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	h.Logger.InfoContext(ctx, "installation event",
		"event", eventType, "action", ev.Action, "delivery", deliveryID,
		"installation", ev.Installation.ID, "account", ev.Installation.Account.Login,
		"sender", ev.Sender.Login,
		"repositories", len(ev.Repositories), "added", len(ev.Added), "removed", len(ev.Removed))
	return nil
}
