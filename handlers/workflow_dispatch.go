package handlers

import (
	"context"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/runner"
)

// WorkflowDispatch starts a job from a manual workflow run whose inputs name
// an issue_number or a pr_number, with an optional prompt.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#workflow_dispatch
type WorkflowDispatch struct{ Base }

var _ githubapp.EventHandler = (*WorkflowDispatch)(nil)

// Handles lists the events this handler handles.
func (h *WorkflowDispatch) Handles() []string { return []string{"workflow_dispatch"} }

// Handle handles one workflow_dispatch event.
func (h *WorkflowDispatch) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev workflowDispatchEvent
	if err := decode(eventType, payload, &ev); err != nil {
		return err
	}
	in, err := parseDispatchInputs(ev.Inputs)
	if err != nil {
		return &BadPayloadError{Event: eventType, Err: err}
	}
	return h.dispatch(ctx, eventType, deliveryID, ev.envelope, in)
}

// dispatch turns a manual dispatch into a request. A dispatch that names no
// issue is ignored: the same workflow may be dispatched for other purposes.
func (b *Base) dispatch(ctx context.Context, eventType, deliveryID string, ev envelope, in dispatchInputs) error {
	if b.isBot(ev.Sender) {
		return nil
	}
	number, isPR, err := in.target()
	if err != nil {
		b.Logger.Info("dispatch ignored", "delivery", deliveryID, "reason", err.Error())
		return nil
	}
	req, err := newRequest(eventType, deliveryID, ev, number, runner.TriggerDispatch, ev.Sender)
	if err != nil {
		return err
	}
	req.IsPullRequest = isPR
	req.Instruction = in.Prompt
	client, err := b.client(ctx, req.InstallationID)
	if err != nil {
		return err
	}
	return b.submit(ctx, client, req, ack{})
}
