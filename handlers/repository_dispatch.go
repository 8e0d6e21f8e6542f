package handlers

import (
	"context"

	"github.com/palantir/go-githubapp/githubapp"
)

// RepositoryDispatch starts a job from a repository_dispatch of event type
// "gohands" whose client payload names an issue_number or a pr_number, with
// an optional prompt.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#repository_dispatch
type RepositoryDispatch struct{ Base }

var _ githubapp.EventHandler = (*RepositoryDispatch)(nil)

// Handles lists the events this handler handles.
func (h *RepositoryDispatch) Handles() []string { return []string{"repository_dispatch"} }

// Handle handles one repository_dispatch event.
func (h *RepositoryDispatch) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev repositoryDispatchEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != DispatchEventType {
		return nil
	}
	in, err := parseDispatchInputs(ev.ClientPayload)
	if err != nil {
		return &BadPayloadError{Event: eventType, Err: err}
	}
	return h.dispatch(ctx, eventType, deliveryID, ev.envelope, in)
}
