// Package handlers turns GitHub webhook events into jobs: one file and one
// type per event, sharing Base. A handler decodes the event, returns early
// for what is not for the bot, checks that the person who asked may write to
// the repository, and enqueues a runner.Request. Nothing here outlives the
// webhook request: the work itself is the runner's.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/gohands/gohands/runner"
	"github.com/gohands/gohands/runner/publish"
)

// Queue is what the handlers need of the job queue.
type Queue interface {
	Enqueue(ctx context.Context, r runner.Request) (runner.Enqueued, error)
	Cancel(ctx context.Context, key runner.Key, by string) (bool, error)
	// Once reports whether name is seen for the first time, and records it.
	Once(ctx context.Context, name string) (bool, error)
}

// Bot is the App's identity, learned from GET /app at start-up.
type Bot struct {
	// Slug is the App's slug: the mention is "@"+Slug.
	Slug string
	// Login is the bot user's login, Slug+"[bot]".
	Login string
}

// Base holds what every handler shares.
type Base struct {
	// Client returns a GitHub client for an installation (in Actions mode,
	// the workflow's token client, whatever the id).
	Client func(ctx context.Context, installationID int64) (*github.Client, error)
	Queue  Queue
	Bot    Bot
	// Label is the label that starts a job when added to an issue.
	Label  string
	Logger *slog.Logger
	// Courtesy makes reactions and replies after the webhook is answered;
	// nil makes them before.
	Courtesy *Courtesy

	perms *permCache // shared by the handlers All returns
}

// All returns every handler, sharing base and one cache of permissions
// (see PermissionTTL).
func All(base Base) []githubapp.EventHandler {
	base.perms = newPermCache()
	return []githubapp.EventHandler{
		&Issues{base},
		&IssueComment{base},
		&PullRequestReviewComment{base},
		&PullRequestReview{base},
		&WorkflowDispatch{base},
		&RepositoryDispatch{base},
		&Installation{base},
	}
}

// BadPayloadError marks a webhook body that is not the JSON its event
// promises; the server answers it with 400.
type BadPayloadError struct {
	Event string
	Err   error
}

func (e *BadPayloadError) Error() string {
	return fmt.Sprintf("malformed %s payload: %v", e.Event, e.Err)
}

func (e *BadPayloadError) Unwrap() error { return e.Err }

func decode(event string, payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return &BadPayloadError{Event: event, Err: err}
	}
	return nil
}

// isBot reports whether a GitHub user is a bot: bots never trigger work,
// and the bot itself above all (it would answer itself forever).
func (b *Base) isBot(u user) bool {
	login := u.Login
	return u.Type == "Bot" || strings.HasSuffix(login, "[bot]") || strings.EqualFold(login, b.Bot.Login)
}

// ack says where the 👀 reaction goes.
type ack struct {
	Comment       int64 // issue comment id
	ReviewComment int64 // review comment id
}

// submit checks the requester's permission, enqueues the request and
// acknowledges it. An outsider gets at most one polite reply per issue.
func (b *Base) submit(ctx context.Context, client *github.Client, req runner.Request, a ack) error {
	log := b.log(req)
	key := req.Key
	ok, err := b.canWrite(ctx, client, key, req.Requester)
	if err != nil {
		return err
	}
	if !ok {
		log.Info("ignoring request from a person without write access", "user", req.Requester)
		return b.denied(ctx, client, req)
	}
	req.ReceivedAt = time.Now().UTC()
	res, err := b.Queue.Enqueue(ctx, req)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", key, err)
	}
	if res.Duplicate {
		log.Info("duplicate delivery ignored")
		return nil
	}
	log.Info("job queued", "job", res.Job.ID, "coalesced", res.Coalesced)
	b.react(ctx, client, req, a, "eyes")
	if res.Behind != nil {
		msg := fmt.Sprintf("@%s I'm already working on this; your request is queued and will run as soon as the current job ends.", req.Requester)
		b.reply(ctx, client, req, msg)
	}
	return nil
}

// canWrite asks GitHub for the requester's permission. An API error (after
// publish.Permission's retries) is returned: an unverified person never
// becomes a job.
func (b *Base) canWrite(ctx context.Context, client *github.Client, key runner.Key, user string) (bool, error) {
	if ok, cached := b.perms.get(key.Owner, key.Repo, user); cached {
		return ok, nil
	}
	perm, err := publish.Permission(ctx, client, key.Owner, key.Repo, user)
	if err != nil {
		return false, fmt.Errorf("check permission of %s on %s/%s: %w", user, key.Owner, key.Repo, err)
	}
	ok := publish.CanWrite(perm)
	b.perms.put(key.Owner, key.Repo, user, ok)
	return ok, nil
}

func (b *Base) denied(ctx context.Context, client *github.Client, req runner.Request) error {
	first, err := b.Queue.Once(ctx, "denied:"+req.Key.String())
	if err != nil {
		return fmt.Errorf("record reply to %s: %w", req.Key, err)
	}
	if !first {
		return nil
	}
	msg := fmt.Sprintf("@%s, only people with write access to this repository can ask me to work on it, so I won't start on this. A maintainer can ask me instead.", req.Requester)
	switch req.Trigger {
	case runner.TriggerComment, runner.TriggerReviewComment, runner.TriggerReview:
		msg = fmt.Sprintf("Thanks for the mention, @%s! Only people with write access to this repository can ask me to work on it, so I won't start on this. A maintainer can ask me instead.", req.Requester)
	}
	b.reply(ctx, client, req, msg)
	return nil
}

// stop cancels the running job for the request's key on a person's behalf.
func (b *Base) stop(ctx context.Context, client *github.Client, req runner.Request, a ack) error {
	ok, err := b.canWrite(ctx, client, req.Key, req.Requester)
	if err != nil {
		return err
	}
	if !ok {
		return b.denied(ctx, client, req)
	}
	cancelled, err := b.Queue.Cancel(ctx, req.Key, req.Requester)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", req.Key, err)
	}
	b.log(req).Info("stop requested", "cancelled", cancelled)
	if !cancelled {
		// Removing the label after the work is done is housekeeping, not a request.
		if req.Trigger != runner.TriggerLabel {
			b.reply(ctx, client, req, fmt.Sprintf("@%s there is no job running or queued for this, so there is nothing to stop.", req.Requester))
		}
		return nil
	}
	b.react(ctx, client, req, a, "+1")
	return nil
}

// react adds a reaction to what triggered the request. A failure is logged,
// not returned: the job is queued and must not be lost over an emoji.
func (b *Base) react(ctx context.Context, client *github.Client, req runner.Request, a ack, content string) {
	t := publish.TriggerTarget(a.Comment, a.ReviewComment)
	b.Courtesy.Go(ctx, func(ctx context.Context) {
		if err := publish.React(ctx, client, publish.Key(req.Key), t, content); err != nil {
			b.log(req).Warn("reaction failed", "content", content, "err", err)
		}
	})
}

// reply answers on the issue or PR (in the review thread for a review
// comment). A failure is logged: the reply is a courtesy.
func (b *Base) reply(ctx context.Context, client *github.Client, req runner.Request, body string) {
	target := publish.ReplyTarget{ReviewCommentID: req.ReviewCommentID}
	b.Courtesy.Go(ctx, func(ctx context.Context) {
		if _, err := publish.Reply(ctx, client, publish.Key(req.Key), target, body, nil); err != nil {
			b.log(req).Warn("reply failed", "err", err)
		}
	})
}

func (b *Base) client(ctx context.Context, installationID int64) (*github.Client, error) {
	c, err := b.Client(ctx, installationID)
	if err != nil {
		return nil, fmt.Errorf("github client for installation %d: %w", installationID, err)
	}
	return c, nil
}

func (b *Base) log(req runner.Request) *slog.Logger {
	return b.Logger.With("key", req.Key.String(), "delivery", req.DeliveryID, "installation", req.InstallationID, "trigger", string(req.Trigger))
}

// keyOf builds the job key from a repository and an issue or PR number.
func keyOf(repo repository, number int) (runner.Key, error) {
	owner, name := repo.Owner.Login, repo.Name
	if owner == "" || name == "" || number <= 0 {
		return runner.Key{}, errors.New("payload names no repository or issue number")
	}
	return runner.Key{Owner: owner, Repo: name, Number: number}, nil
}

// newRequest starts the request of an event about issue or PR number of
// the event's repository; a payload that names neither is malformed.
func newRequest(eventType, deliveryID string, ev envelope, number int, trigger runner.Trigger, requester user) (runner.Request, error) {
	key, err := keyOf(ev.Repo, number)
	if err != nil {
		return runner.Request{}, &BadPayloadError{Event: eventType, Err: err}
	}
	return runner.Request{
		Key:            key,
		DeliveryID:     deliveryID,
		InstallationID: ev.Installation.ID,
		Trigger:        trigger,
		Requester:      requester.Login,
	}, nil
}

// command dispatches a parsed comment: work, stop, a reply, or nothing.
func (b *Base) command(ctx context.Context, installationID int64, req runner.Request, body string, a ack) error {
	cmd := ParseComment(body, b.Bot.Slug, b.Label)
	if cmd.Action == ActionIgnore {
		return nil
	}
	client, err := b.client(ctx, installationID)
	if err != nil {
		return err
	}
	switch cmd.Action {
	case ActionStop:
		return b.stop(ctx, client, req, a)
	case ActionReply:
		ok, err := b.canWrite(ctx, client, req.Key, req.Requester)
		if err != nil {
			return err
		}
		if !ok {
			return b.denied(ctx, client, req)
		}
		b.reply(ctx, client, req, cmd.Reply)
		return nil
	default:
		req.Instruction = cmd.Instruction
		return b.submit(ctx, client, req, a)
	}
}
