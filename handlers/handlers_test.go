package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner"
)

// fakeQueue records what the handlers ask of the queue; its errors are
// returned when set.
type fakeQueue struct {
	mu         sync.Mutex
	requests   []runner.Request
	cancels    []string // "key by"
	seen       map[string]bool
	enqueueErr error
	onceErr    error
	behind     *runner.Job
}

func (q *fakeQueue) Enqueue(_ context.Context, r runner.Request) (runner.Enqueued, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.enqueueErr != nil {
		return runner.Enqueued{}, q.enqueueErr
	}
	q.requests = append(q.requests, r)
	return runner.Enqueued{Job: &runner.Job{ID: "job-1", Key: r.Key, Requests: []runner.Request{r}}, Behind: q.behind}, nil
}

func (q *fakeQueue) Cancel(_ context.Context, key runner.Key, by string) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancels = append(q.cancels, key.String()+" "+by)
	return true, nil
}

func (q *fakeQueue) Once(_ context.Context, name string) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.onceErr != nil {
		return false, q.onceErr
	}
	if q.seen == nil {
		q.seen = map[string]bool{}
	}
	first := !q.seen[name]
	q.seen[name] = true
	return first, nil
}

// handlerWorld is the emulator with one repository, a writer (alice) and an
// issue, and the handlers' Base over a fake queue.
type handlerWorld struct {
	gh    *apptest.GitHub
	q     *fakeQueue
	base  Base
	issue int
}

func mustHandlerWorld(t *testing.T) *handlerWorld {
	t.Helper()
	gh := apptest.NewGitHub(t)
	gh.AddRepo(apptest.GitHubRepo{Owner: "octo-org", Name: "greet"})
	if err := gh.SetPermission("octo-org", "greet", "alice", "write"); err != nil {
		t.Fatal(err)
	}
	n, err := gh.AddIssue("octo-org", "greet", apptest.GitHubIssue{Title: "t", Author: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	q := &fakeQueue{}
	return &handlerWorld{gh: gh, q: q, issue: n, base: Base{
		Client: func(context.Context, int64) (*github.Client, error) {
			return gh.Client(gh.InstallationToken()), nil
		},
		Queue:  q,
		Bot:    Bot{Slug: gh.Slug, Login: gh.BotLogin()},
		Label:  "gohands",
		Logger: slog.New(slog.DiscardHandler),
	}}
}

func (w *handlerWorld) repo() *github.Repository {
	return &github.Repository{Name: github.String("greet"), Owner: &github.User{Login: github.String("octo-org")}}
}

func (w *handlerWorld) labeled(action, label string) []byte {
	return mustJSON(&github.IssuesEvent{
		Action:       github.String(action),
		Label:        &github.Label{Name: github.String(label)},
		Issue:        &github.Issue{Number: github.Int(w.issue)},
		Repo:         w.repo(),
		Sender:       &github.User{Login: github.String("alice"), Type: github.String("User")},
		Installation: &github.Installation{ID: github.Int64(w.gh.InstallationID)},
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestDispatchInputs(t *testing.T) {
	tests := []struct {
		raw       string
		number    int
		isPR      bool
		parseErr  string
		targetErr string
	}{
		{raw: `{"issue_number": "12", "prompt": "p"}`, number: 12},
		{raw: `{"issue_number": 12}`, number: 12},
		{raw: `{"issue_number": "#12"}`, number: 12},
		{raw: `{"pr_number": "7"}`, number: 7, isPR: true},
		{raw: `{"issue_number": "", "pr_number": 7}`, number: 7, isPR: true},
		{raw: `{"issue_number": "1", "pr_number": "2"}`, targetErr: "not both"},
		{raw: `{}`, targetErr: "no issue_number"},
		{raw: `null`, targetErr: "no issue_number"},
		{raw: ``, targetErr: "no issue_number"},
		{raw: `{"issue_number": null}`, targetErr: "no issue_number"},
		{raw: `{"issue_number": "0"}`, targetErr: "no issue_number"},
		{raw: `{"issue_number": "abc"}`, parseErr: "is not an issue or pull request number"},
		{raw: `{"issue_number": "-3"}`, parseErr: "is not an issue"},
		{raw: `{"issue_number": 1.5}`, parseErr: "is not an issue"},
		{raw: `{"issue_number": true}`, parseErr: "is not an issue"},
		{raw: `{"issue_number": "99999999999999999999"}`, parseErr: "is not an issue"},
		{raw: `[1, 2]`, parseErr: "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			in, err := parseDispatchInputs(json.RawMessage(tt.raw))
			if tt.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.parseErr) {
					t.Fatalf("parse error %v, want one containing %q", err, tt.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n, isPR, err := in.target()
			if tt.targetErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.targetErr) {
					t.Fatalf("target error %v, want one containing %q", err, tt.targetErr)
				}
				return
			}
			if err != nil || n != tt.number || isPR != tt.isPR {
				t.Errorf("target = %d, %v, %v; want %d, %v", n, isPR, err, tt.number, tt.isPR)
			}
		})
	}
}

// TestMalformedPayloads: every handler answers a body that is not its
// event's JSON with a BadPayloadError (the server's 400), never a panic.
func TestMalformedPayloads(t *testing.T) {
	w := mustHandlerWorld(t)
	bodies := []string{``, `{`, `[]`, `"x"`, `{"sender": "alice"}`, `{"sender": {"login": 5}}`}
	for _, h := range All(w.base) {
		for _, event := range h.Handles() {
			for _, body := range bodies {
				err := h.Handle(context.Background(), event, "d-1", []byte(body))
				var bad *BadPayloadError
				if !errors.As(err, &bad) {
					t.Errorf("%s %q: error %v, want a BadPayloadError", event, body, err)
				} else if bad.Event != event || !strings.Contains(err.Error(), event) {
					t.Errorf("%s %q: error %q does not name the event", event, body, err)
				}
			}
		}
	}
	if len(w.q.requests) != 0 {
		t.Errorf("malformed payloads made requests: %+v", w.q.requests)
	}
}

// TestPayloadWithoutIssue: a well-formed event that names no repository or
// number is a bad payload too, not a job for issue 0.
func TestPayloadWithoutIssue(t *testing.T) {
	w := mustHandlerWorld(t)
	body := mustJSON(&github.IssueCommentEvent{
		Action:  github.String("created"),
		Comment: &github.IssueComment{ID: github.Int64(5), Body: github.String("@gohands fix it"), User: &github.User{Login: github.String("alice")}},
		Repo:    w.repo(),
	})
	var bad *BadPayloadError
	if err := (&IssueComment{w.base}).Handle(context.Background(), "issue_comment", "d", body); !errors.As(err, &bad) {
		t.Errorf("error %v, want a BadPayloadError", err)
	}
}

func TestUnlabeledCancels(t *testing.T) {
	w := mustHandlerWorld(t)
	h := &Issues{w.base}
	if err := h.Handle(context.Background(), "issues", "d-1", w.labeled("unlabeled", "bug")); err != nil {
		t.Fatal(err)
	}
	if len(w.q.cancels) != 0 {
		t.Fatalf("removing another label cancelled: %v", w.q.cancels)
	}
	if err := h.Handle(context.Background(), "issues", "d-2", w.labeled("unlabeled", "GoHands")); err != nil {
		t.Fatal(err)
	}
	want := "octo-org/greet#1 alice"
	if len(w.q.cancels) != 1 || w.q.cancels[0] != want {
		t.Errorf("cancels = %q, want [%q]", w.q.cancels, want)
	}
	if len(w.q.requests) != 0 {
		t.Errorf("unlabeling made requests: %+v", w.q.requests)
	}
}

// TestErrorsReachTheServer: what the handler cannot do is returned (the
// server answers 500 and logs it), never swallowed, and never a job.
func TestErrorsReachTheServer(t *testing.T) {
	errQueue := errors.New("store is read-only")
	errClient := errors.New("installation token refused")
	tests := []struct {
		name  string
		setup func(w *handlerWorld)
		user  string
		want  error
	}{
		{"enqueue fails", func(w *handlerWorld) { w.q.enqueueErr = errQueue }, "alice", errQueue},
		{"no client", func(w *handlerWorld) {
			w.base.Client = func(context.Context, int64) (*github.Client, error) { return nil, errClient }
		}, "alice", errClient},
		{"cannot record the reply to an outsider", func(w *handlerWorld) { w.q.onceErr = errQueue }, "mallory", errQueue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustHandlerWorld(t)
			tt.setup(w)
			err := (&Issues{w.base}).Handle(context.Background(), "issues", "d-1", withSender(w.labeled("labeled", "gohands"), tt.user))
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if len(w.q.requests) != 0 {
				t.Errorf("requests = %+v, want none", w.q.requests)
			}
		})
	}
}

func withSender(body []byte, login string) []byte {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		panic(err)
	}
	m["sender"].(map[string]any)["login"] = login
	return mustJSON(m)
}

func TestDispatchToPullRequest(t *testing.T) {
	w := mustHandlerWorld(t)
	body := mustJSON(map[string]any{
		"action":         "gohands",
		"client_payload": map[string]any{"pr_number": "3", "prompt": "rebase it"},
		"repository":     w.repo(),
		"sender":         map[string]any{"login": "alice", "type": "User"},
		"installation":   map[string]any{"id": w.gh.InstallationID},
	})
	if err := (&RepositoryDispatch{w.base}).Handle(context.Background(), "repository_dispatch", "d-1", body); err != nil {
		t.Fatal(err)
	}
	if len(w.q.requests) != 1 {
		t.Fatalf("requests = %+v, want one", w.q.requests)
	}
	r := w.q.requests[0]
	if r.Key.Number != 3 || !r.IsPullRequest || r.Instruction != "rebase it" || r.Trigger != runner.TriggerDispatch || r.Requester != "alice" {
		t.Errorf("request = %+v", r)
	}
}

func TestBusyKeyTellsTheRequester(t *testing.T) {
	w := mustHandlerWorld(t)
	w.q.behind = &runner.Job{ID: "running-1", State: runner.StateRunning}
	if err := (&Issues{w.base}).Handle(context.Background(), "issues", "d-1", w.labeled("labeled", "gohands")); err != nil {
		t.Fatal(err)
	}
	cs, err := w.gh.Comments("octo-org", "greet", w.issue)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "queued") || !strings.Contains(cs[0].Body, "@alice") {
		t.Errorf("comments = %+v, want one telling @alice the request is queued", cs)
	}
}
