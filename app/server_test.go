package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gohands/gohands/app/apptest"
	"github.com/gohands/gohands/runner"
)

// These tests drive the real App over HTTP with signed real-shaped payloads
// (testdata/webhooks, retargeted at the world's repository) and check the
// jobs in its store and what reached the GitHub emulator.

var deliveries atomic.Int64

// nextDelivery returns a fresh X-GitHub-Delivery.
func nextDelivery() string { return fmt.Sprintf("delivery-%d", deliveries.Add(1)) }

// set puts v at the dotted path in m, creating objects on the way.
func set(m map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

// inWorld retargets a real payload at the world's repository and
// installation, sent by user, then applies more edits.
func (h *harness) inWorld(user string, more ...func(m map[string]any)) func(m map[string]any) {
	return func(m map[string]any) {
		set(m, "repository.name", sampleRepo)
		set(m, "repository.full_name", sampleOwner+"/"+sampleRepo)
		set(m, "repository.owner.login", sampleOwner)
		set(m, "repository.clone_url", h.w.cloneURL)
		set(m, "repository.default_branch", "main")
		set(m, "installation", map[string]any{"id": h.w.gh.InstallationID})
		set(m, "sender.login", user)
		set(m, "sender.type", "User")
		for _, e := range more {
			e(m)
		}
	}
}

// mustIssue adds an issue to the world and returns its number.
func (h *harness) mustIssue(title string) int {
	h.t.Helper()
	n, err := h.w.gh.AddIssue(sampleOwner, sampleRepo, apptest.GitHubIssue{Title: title, Body: "body of " + title, Author: sampleUser})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// mustPR adds a pull request from branch head to main and returns its number.
func (h *harness) mustPR(head string) int {
	h.t.Helper()
	n, err := h.w.gh.AddPullRequest(sampleOwner, sampleRepo, apptest.GitHubPR{Title: "PR " + head, Body: "changes", Author: sampleUser, Head: head})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// issueComment seeds a comment by user on issue or PR n in the emulator and
// returns the issue_comment webhook (action created unless edited) and the
// comment's id.
func (h *harness) issueComment(n int, user, body string, more ...func(m map[string]any)) ([]byte, int64) {
	h.t.Helper()
	id, err := h.w.gh.AddComment(sampleOwner, sampleRepo, n, user, body)
	if err != nil {
		h.t.Fatal(err)
	}
	is, err := h.w.gh.Issue(sampleOwner, sampleRepo, n)
	if err != nil {
		h.t.Fatal(err)
	}
	edits := append([]func(m map[string]any){func(m map[string]any) {
		set(m, "issue.number", n)
		if is.IsPullRequest {
			set(m, "issue.pull_request", map[string]any{"url": fmt.Sprintf("%s/repos/%s/%s/pulls/%d", h.w.gh.URL, sampleOwner, sampleRepo, n)})
		} else {
			delete(m["issue"].(map[string]any), "pull_request")
		}
		set(m, "comment.id", id)
		set(m, "comment.body", body)
		set(m, "comment.user.login", user)
		set(m, "comment.user.type", "User")
	}}, more...)
	return payload(h.t, "issue_comment.created.json", h.inWorld(user, edits...)), id
}

// labeledPayload is the real issues.labeled payload for issue n and label.
func (h *harness) labeledPayload(n int, label, user string) []byte {
	return payload(h.t, "issues.labeled.json", h.inWorld(user, func(m map[string]any) {
		set(m, "issue.number", n)
		set(m, "label.name", label)
	}))
}

// comments returns the conversation comments of issue n.
func (h *harness) comments(n int) []apptest.GitHubComment {
	h.t.Helper()
	cs, err := h.w.gh.Comments(sampleOwner, sampleRepo, n)
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

// botComments returns the comments the bot wrote on issue n.
func (h *harness) botComments(n int) []apptest.GitHubComment {
	h.t.Helper()
	var out []apptest.GitHubComment
	for _, c := range h.comments(n) {
		if c.Author == h.w.gh.BotLogin() {
			out = append(out, c)
		}
	}
	return out
}

// mustAccept sends a signed payload and fails unless the answer is 202.
func (h *harness) mustAccept(event string, body []byte) {
	h.t.Helper()
	if got := h.sendRaw(event, nextDelivery(), body); got != http.StatusAccepted {
		h.t.Fatalf("%s webhook: status %d, want 202\nlog:\n%s", event, got, h.log.String())
	}
}

// waitState waits until the job of issue n with index i is in state s.
func (h *harness) waitState(n, i int, s runner.State) *runner.Job {
	h.t.Helper()
	var job *runner.Job
	waitFor(h.t, fmt.Sprintf("job %d of #%d to be %s", i, n, s), func() bool {
		jobs := h.jobs(n)
		if len(jobs) <= i {
			return false
		}
		job = jobs[i]
		return job.State == s
	})
	return job
}

// quickScript finishes every job at once: the model's script is empty.
func quickScript() harnessOption { return withScript() }

// sleepScript keeps the first job running: its first step sleeps 30 s in
// the terminal. Later jobs finish at once.
func sleepScript() harnessOption {
	return withScript(apptest.LLMTool("terminal", map[string]any{"command": "sleep 30", "timeout": 60}))
}

func TestWebhookTriggersCreateOneJob(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	type trigger struct {
		event string
		body  []byte
		want  runner.Request // Key.Number, Trigger, IsPullRequest, Requester, Instruction and the ids
	}
	tests := []struct {
		name  string
		build func(n int) trigger
		pr    bool
	}{
		{"issue labeled gohands", func(n int) trigger {
			return trigger{"issues", h.labeledPayload(n, "gohands", sampleUser),
				runner.Request{Trigger: runner.TriggerLabel}}
		}, false},
		{"issue assigned to the bot", func(n int) trigger {
			body := payload(t, "issues.assigned.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "issue.number", n)
				set(m, "assignee.login", h.w.gh.BotLogin())
				set(m, "assignee.type", "Bot")
			}))
			return trigger{"issues", body, runner.Request{Trigger: runner.TriggerAssign}}
		}, false},
		{"comment on an issue", func(n int) trigger {
			body, id := h.issueComment(n, sampleUser, "@gohands fix it")
			return trigger{"issue_comment", body,
				runner.Request{Trigger: runner.TriggerComment, Instruction: "fix it", CommentID: id}}
		}, false},
		{"comment on a pull request", func(n int) trigger {
			body, id := h.issueComment(n, sampleUser, "@gohands fix it")
			return trigger{"issue_comment", body,
				runner.Request{Trigger: runner.TriggerComment, IsPullRequest: true, Instruction: "fix it", CommentID: id}}
		}, true},
		{"review comment mentioning", func(n int) trigger {
			id, err := h.w.gh.AddReviewComment(sampleOwner, sampleRepo, n, apptest.GitHubReviewComment{
				Author: sampleUser, Body: "@gohands use printf here", Path: "greet.sh", Line: 2})
			if err != nil {
				t.Fatal(err)
			}
			body := payload(t, "pull_request_review_comment.created.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "pull_request.number", n)
				set(m, "comment.id", id)
				set(m, "comment.body", "@gohands use printf here")
				set(m, "comment.user.login", sampleUser)
				set(m, "comment.user.type", "User")
			}))
			return trigger{"pull_request_review_comment", body, runner.Request{Trigger: runner.TriggerReviewComment,
				IsPullRequest: true, Instruction: "use printf here", ReviewCommentID: id, ReviewID: 237895671}}
		}, true},
		{"review submitted mentioning", func(n int) trigger {
			id, err := h.w.gh.AddReview(sampleOwner, sampleRepo, n, apptest.GitHubReview{
				Author: sampleUser, Body: "@gohands address these comments", State: "CHANGES_REQUESTED"})
			if err != nil {
				t.Fatal(err)
			}
			body := payload(t, "pull_request_review.submitted.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "pull_request.number", n)
				set(m, "review.id", id)
				set(m, "review.body", "@gohands address these comments")
				set(m, "review.user.login", sampleUser)
				set(m, "review.user.type", "User")
			}))
			return trigger{"pull_request_review", body, runner.Request{Trigger: runner.TriggerReview,
				IsPullRequest: true, Instruction: "address these comments", ReviewID: id}}
		}, true},
		{"workflow_dispatch with string inputs", func(n int) trigger {
			body := payload(t, "workflow_dispatch.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "inputs", map[string]any{"issue_number": strconv.Itoa(n), "prompt": "add a test for greet.sh"})
			}))
			return trigger{"workflow_dispatch", body, runner.Request{Trigger: runner.TriggerDispatch, Instruction: "add a test for greet.sh"}}
		}, false},
		{"repository_dispatch gohands", func(n int) trigger {
			body := payload(t, "repository_dispatch.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "action", "gohands")
				set(m, "client_payload", map[string]any{"issue_number": n, "prompt": "update the README"})
			}))
			return trigger{"repository_dispatch", body, runner.Request{Trigger: runner.TriggerDispatch, Instruction: "update the README"}}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			if tt.pr {
				n = h.mustPR("feature/" + strings.ReplaceAll(tt.name, " ", "-"))
			} else {
				n = h.mustIssue(tt.name)
			}
			tr := tt.build(n)
			delivery := nextDelivery()
			sent := time.Now()
			if got := h.sendRaw(tr.event, delivery, tr.body); got != http.StatusAccepted {
				t.Fatalf("status %d, want 202", got)
			}
			jobs := h.jobs(n)
			if len(jobs) != 1 || len(jobs[0].Requests) != 1 {
				t.Fatalf("jobs of #%d = %+v, want one with one request", n, jobs)
			}
			got := jobs[0].Requests[0]
			want := tr.want
			want.Key = h.key(n)
			want.DeliveryID = delivery
			want.InstallationID = h.w.gh.InstallationID
			want.Requester = sampleUser
			want.ReceivedAt = got.ReceivedAt
			if got.ReceivedAt.IsZero() {
				t.Error("ReceivedAt is zero")
			}
			// The text of the issue or PR as the payload showed it is kept
			// (see runner.Request.Seen); a dispatch carries none.
			var p struct {
				Issue       *runner.Seen `json:"issue"`
				PullRequest *runner.Seen `json:"pull_request"`
			}
			if err := json.Unmarshal(tr.body, &p); err != nil {
				t.Fatal(err)
			}
			wantSeen := p.Issue
			if tr.event == "pull_request_review_comment" || tr.event == "pull_request_review" {
				wantSeen = p.PullRequest
			}
			switch {
			case (got.Seen == nil) != (wantSeen == nil):
				t.Errorf("request.Seen = %+v, want %+v", got.Seen, wantSeen)
			case got.Seen != nil && (*got.Seen != *wantSeen || got.Seen.Title == ""):
				t.Errorf("request.Seen = %+v, want the payload's %+v", *got.Seen, *wantSeen)
			}
			got.Seen = nil
			if got != want {
				t.Errorf("request =\n%+v\nwant\n%+v", got, want)
			}
			// The 👀 lands on what triggered the job within 2 s of the webhook.
			subject, commentID := apptest.GitHubReactIssue, int64(0)
			switch {
			case want.CommentID != 0:
				subject, commentID = apptest.GitHubReactIssueComment, want.CommentID
			case want.ReviewCommentID != 0:
				subject, commentID = apptest.GitHubReactReviewComment, want.ReviewCommentID
			}
			var eyes []apptest.GitHubReaction
			for _, r := range h.w.gh.Reactions(sampleOwner, sampleRepo) {
				if r.Content == "eyes" && r.Subject == subject && r.CommentID == commentID && (commentID != 0 || r.Number == n) {
					eyes = append(eyes, r)
				}
			}
			if len(eyes) != 1 {
				t.Fatalf("👀 reactions on the %s = %+v, want one", subject, eyes)
			}
			if d := eyes[0].At.Sub(sent); d > 2*time.Second {
				t.Errorf("👀 came %v after the webhook, want under 2s", d)
			}
			if eyes[0].User != h.w.gh.BotLogin() {
				t.Errorf("👀 by %q, want the bot", eyes[0].User)
			}
		})
	}
}

func TestWebhookNonTriggersCreateNoJob(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	if err := h.w.gh.SetPermission(sampleOwner, sampleRepo, "renovate", "write"); err != nil {
		t.Fatal(err)
	}
	mention := func(n int, user, body string, more ...func(m map[string]any)) (string, []byte) {
		b, _ := h.issueComment(n, user, body, more...)
		return "issue_comment", b
	}
	tests := []struct {
		name  string
		build func(n int) (event string, body []byte)
	}{
		{"other label", func(n int) (string, []byte) { return "issues", h.labeledPayload(n, "bug", sampleUser) }},
		{"our label added by a bot", func(n int) (string, []byte) {
			return "issues", payload(t, "issues.labeled.json", h.inWorld("renovate", func(m map[string]any) {
				set(m, "issue.number", n)
				set(m, "label.name", "gohands")
				set(m, "sender.type", "Bot")
			}))
		}},
		{"assigned to someone else", func(n int) (string, []byte) {
			return "issues", payload(t, "issues.assigned.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "issue.number", n)
				set(m, "assignee.login", "bob")
			}))
		}},
		{"issue opened mentioning the bot", func(n int) (string, []byte) {
			return "issues", payload(t, "issues.opened.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "issue.number", n)
				set(m, "issue.body", "@gohands fix it")
			}))
		}},
		{"comment without mention", func(n int) (string, []byte) { return mention(n, sampleUser, "looks good to me") }},
		{"mention of a longer login", func(n int) (string, []byte) { return mention(n, sampleUser, "@gohands-dev fix it") }},
		{"mention in a quote", func(n int) (string, []byte) {
			return mention(n, sampleUser, "> @gohands fix it\n\nI agree with the above")
		}},
		{"mention in a code block", func(n int) (string, []byte) {
			return mention(n, sampleUser, "Try this:\n```\n@gohands fix it\n```\n")
		}},
		{"mention in inline code", func(n int) (string, []byte) { return mention(n, sampleUser, "type `@gohands fix it` to ask") }},
		{"edited comment", func(n int) (string, []byte) {
			return mention(n, sampleUser, "@gohands fix it", func(m map[string]any) { set(m, "action", "edited") })
		}},
		{"deleted comment", func(n int) (string, []byte) {
			return mention(n, sampleUser, "@gohands fix it", func(m map[string]any) { set(m, "action", "deleted") })
		}},
		{"comment by a bot", func(n int) (string, []byte) {
			return mention(n, "renovate", "@gohands fix it", func(m map[string]any) {
				set(m, "comment.user.type", "Bot")
				set(m, "sender.type", "Bot")
			})
		}},
		{"comment by the bot itself", func(n int) (string, []byte) {
			return mention(n, h.w.gh.BotLogin(), "@gohands fix it", func(m map[string]any) {
				set(m, "comment.user.type", "Bot")
				set(m, "sender.type", "Bot")
			})
		}},
		{"comment by the bot itself typed User", func(n int) (string, []byte) {
			return mention(n, h.w.gh.BotLogin(), "I'm on it. @gohands")
		}},
		{"workflow_dispatch naming no issue", func(n int) (string, []byte) {
			return "workflow_dispatch", payload(t, "workflow_dispatch.json", h.inWorld(sampleUser))
		}},
		{"repository_dispatch of another type", func(n int) (string, []byte) {
			return "repository_dispatch", payload(t, "repository_dispatch.json", h.inWorld(sampleUser, func(m map[string]any) {
				set(m, "client_payload", map[string]any{"issue_number": n})
			}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := h.mustIssue(tt.name)
			event, body := tt.build(n)
			before := len(h.comments(n))
			h.mustAccept(event, body)
			if jobs := h.jobs(n); len(jobs) != 0 {
				t.Errorf("jobs = %+v, want none", jobs)
			}
			if got := h.comments(n); len(got) != before {
				t.Errorf("the bot answered: %+v", got[before:])
			}
			for _, r := range h.w.gh.Reactions(sampleOwner, sampleRepo) {
				if r.Number == n {
					t.Errorf("reaction on #%d: %+v", n, r)
				}
			}
		})
	}
}

func TestWebhookOtherEvents(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	tests := []struct {
		event, file string
		want        int
		logged      string
	}{
		{"ping", "ping.json", http.StatusOK, ""},
		{"ping", "ping.with-app_id.json", http.StatusOK, ""},
		{"installation", "installation.created.json", http.StatusAccepted, "installation event"},
		{"installation_repositories", "installation_repositories.added.json", http.StatusAccepted, "installation event"},
		{"pull_request", "pull_request.opened.json", http.StatusAccepted, ""},
		{"star", "ping.json", http.StatusAccepted, ""}, // an event no handler takes
	}
	for _, tt := range tests {
		t.Run(tt.event+"/"+tt.file, func(t *testing.T) {
			delivery := nextDelivery()
			if got := h.sendRaw(tt.event, delivery, payload(t, tt.file, nil)); got != tt.want {
				t.Fatalf("status %d, want %d", got, tt.want)
			}
			if tt.logged != "" && !logHas(h.log.String(), tt.logged, "delivery="+delivery) {
				t.Errorf("no %q log line for delivery %s:\n%s", tt.logged, delivery, h.log.String())
			}
		})
	}
	// None of these is a request: nothing may reach the repository API.
	for _, c := range h.w.gh.Calls() {
		if strings.HasPrefix(c.Path, "/repos/") {
			t.Errorf("call to the repository API: %s %s", c.Method, c.Path)
		}
	}
}

// logHas reports whether one line of log holds every part.
func logHas(log string, parts ...string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestWebhookPermissions(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	if err := h.w.gh.SetPermission(sampleOwner, sampleRepo, "rita", "read"); err != nil {
		t.Fatal(err)
	}
	if err := h.w.gh.SetPermission(sampleOwner, sampleRepo, "tom", "triage"); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"rita", "tom", "nobody"} {
		t.Run(user, func(t *testing.T) {
			n := h.mustIssue("asked by " + user)
			body, _ := h.issueComment(n, user, "@gohands fix it")
			h.mustAccept("issue_comment", body)
			h.mustAccept("issues", h.labeledPayload(n, "gohands", user))
			body, _ = h.issueComment(n, user, "@gohands please, fix it")
			h.mustAccept("issue_comment", body)
			if jobs := h.jobs(n); len(jobs) != 0 {
				t.Fatalf("jobs = %+v, want none", jobs)
			}
			replies := h.botComments(n)
			if len(replies) != 1 {
				t.Fatalf("bot comments = %+v, want exactly one polite reply", replies)
			}
			if !strings.Contains(replies[0].Body, "@"+user) || !strings.Contains(replies[0].Body, "write access") {
				t.Errorf("reply does not address %s or say why:\n%s", user, replies[0].Body)
			}
		})
	}
	t.Run("maintain and admin may", func(t *testing.T) {
		for _, p := range []string{"maintain", "admin"} {
			user := "user-" + p
			if err := h.w.gh.SetPermission(sampleOwner, sampleRepo, user, p); err != nil {
				t.Fatal(err)
			}
			n := h.mustIssue("asked by " + user)
			body, _ := h.issueComment(n, user, "@gohands fix it")
			h.mustAccept("issue_comment", body)
			if jobs := h.jobs(n); len(jobs) != 1 || jobs[0].Requests[0].Requester != user {
				t.Errorf("%s: jobs = %+v, want one requested by %s", p, jobs, user)
			}
		}
	})
}

func TestWebhookPermissionAPIFailing(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	t.Run("twice then succeeds", func(t *testing.T) {
		n := h.mustIssue("flaky permission API")
		h.w.gh.FailPermission(2)
		body, _ := h.issueComment(n, sampleUser, "@gohands fix it")
		h.mustAccept("issue_comment", body)
		if jobs := h.jobs(n); len(jobs) != 1 {
			t.Fatalf("jobs = %+v, want one after the retries", jobs)
		}
		if got := permissionCalls(h, sampleUser); got != 3 {
			t.Errorf("permission calls for %s = %d, want 3 (two 502s and a success)", sampleUser, got)
		}
	})
	t.Run("always", func(t *testing.T) {
		// Another writer: alice's permission is cached from the subtest above.
		const user = "bob"
		if err := h.w.gh.SetPermission(sampleOwner, sampleRepo, user, "write"); err != nil {
			t.Fatal(err)
		}
		n := h.mustIssue("permission API down")
		h.w.gh.FailPermission(1 << 20)
		t.Cleanup(func() { h.w.gh.FailPermission(0) })
		delivery := nextDelivery()
		body, _ := h.issueComment(n, user, "@gohands fix it")
		got := h.sendRaw("issue_comment", delivery, body)
		if got >= 200 && got < 300 {
			t.Errorf("status %d, want non-2xx so GitHub shows the failed delivery", got)
		}
		if !logHas(h.log.String(), "webhook failed", "delivery="+delivery, "502") {
			t.Errorf("no logged error for delivery %s:\n%s", delivery, h.log.String())
		}
		if jobs := h.jobs(n); len(jobs) != 0 {
			t.Fatalf("jobs = %+v, want none for an unverified person", jobs)
		}
		if c := h.botComments(n); len(c) != 0 {
			t.Errorf("bot comments = %+v, want none", c)
		}
	})
}

// permissionCalls counts the collaborator-permission requests for user.
func permissionCalls(h *harness, user string) int {
	n := 0
	for _, c := range h.w.gh.Calls() {
		if strings.HasSuffix(c.Path, "/collaborators/"+user+"/permission") {
			n++
		}
	}
	return n
}

func TestWebhookStopAndHelp(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, sleepScript())
	n := h.w.issue
	h.mustAccept("issues", h.labeledPayload(n, "gohands", sampleUser))
	h.waitState(n, 0, runner.StateRunning)

	body, id := h.issueComment(n, sampleUser, "@gohands help")
	h.mustAccept("issue_comment", body)
	var help []apptest.GitHubComment
	for _, c := range h.botComments(n) {
		if strings.Contains(c.Body, "@gohands stop") && strings.Contains(c.Body, "`gohands`") {
			help = append(help, c)
		}
	}
	if len(help) != 1 {
		t.Errorf("want one usage reply naming the stop command and the label, got %+v", h.botComments(n))
	}
	if jobs := h.jobs(n); len(jobs) != 1 {
		t.Errorf("help started work: jobs = %+v", jobs)
	}

	body, id = h.issueComment(n, sampleUser, "@gohands stop")
	sent := time.Now()
	h.mustAccept("issue_comment", body)
	job := h.waitState(n, 0, runner.StateCancelled)
	if d := time.Since(sent); d > 10*time.Second {
		t.Errorf("the job took %v to stop", d)
	}
	if !strings.Contains(job.Reason, sampleUser) {
		t.Errorf("reason %q does not say who stopped it", job.Reason)
	}
	if jobs := h.jobs(n); len(jobs) != 1 {
		t.Errorf("stop started work: jobs = %+v", jobs)
	}
	if !slices.ContainsFunc(h.w.gh.Reactions(sampleOwner, sampleRepo), func(r apptest.GitHubReaction) bool {
		return r.CommentID == id && r.Content == "+1"
	}) {
		t.Errorf("no 👍 on the stop comment: %+v", h.w.gh.Reactions(sampleOwner, sampleRepo))
	}

	// Nothing left to stop: the bot says so.
	body, _ = h.issueComment(n, sampleUser, "@gohands stop")
	h.mustAccept("issue_comment", body)
	if !slices.ContainsFunc(h.botComments(n), func(c apptest.GitHubComment) bool { return strings.Contains(c.Body, "nothing to stop") }) {
		t.Errorf("no 'nothing to stop' reply: %+v", h.botComments(n))
	}
}

func TestWebhookDuplicateDelivery(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	n := h.mustIssue("duplicate")
	body, id := h.issueComment(n, sampleUser, "@gohands fix it")
	delivery := nextDelivery()
	for range 2 {
		if got := h.sendRaw("issue_comment", delivery, body); got != http.StatusAccepted {
			t.Fatalf("status %d, want 202", got)
		}
	}
	if jobs := h.jobs(n); len(jobs) != 1 || len(jobs[0].Requests) != 1 {
		t.Fatalf("jobs = %+v, want one with one request", jobs)
	}
	eyes := 0
	for _, r := range h.w.gh.Reactions(sampleOwner, sampleRepo) {
		if r.CommentID == id && r.Content == "eyes" {
			eyes++
		}
	}
	if eyes != 1 {
		t.Errorf("👀 given %d times, want once", eyes)
	}
	// The same comment under a new delivery id is a new request.
	h.mustAccept("issue_comment", body)
	if jobs := h.jobs(n); len(jobs) < 1 || len(jobs[len(jobs)-1].Requests)+len(jobs)-1 != 2 {
		t.Errorf("jobs after a redelivery under a new id = %+v, want the second request recorded", jobs)
	}
}

func TestWebhookCoalescing(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, sleepScript())
	n := h.w.issue
	h.mustAccept("issues", h.labeledPayload(n, "gohands", sampleUser))
	running := h.waitState(n, 0, runner.StateRunning)

	asks := []string{"first, rename greet", "second, add a test", "third, update the README"}
	for _, a := range asks {
		body, _ := h.issueComment(n, sampleUser, "@gohands "+a)
		h.mustAccept("issue_comment", body)
	}
	jobs := h.jobs(n)
	if len(jobs) != 2 || jobs[0].ID != running.ID {
		t.Fatalf("jobs = %+v, want the running one and one follow-up", jobs)
	}
	if jobs[0].State != runner.StateRunning || jobs[1].State != runner.StateQueued {
		t.Errorf("states = %s, %s; want running, queued", jobs[0].State, jobs[1].State)
	}
	var got []string
	for _, r := range jobs[1].Requests {
		got = append(got, r.Instruction)
	}
	if !slices.Equal(got, asks) {
		t.Errorf("follow-up instructions = %q, want %q in order", got, asks)
	}
	queued := 0
	for _, c := range h.botComments(n) {
		if strings.Contains(c.Body, "queued") && strings.Contains(c.Body, "@"+sampleUser) {
			queued++
		}
	}
	if queued == 0 {
		t.Errorf("the requester was not told the request is queued: %+v", h.botComments(n))
	}
	// Stopping cancels both; the follow-up never runs.
	body, _ := h.issueComment(n, sampleUser, "@gohands stop")
	h.mustAccept("issue_comment", body)
	for _, j := range h.waitDone(n) {
		if j.State != runner.StateCancelled {
			t.Errorf("job %s is %s after stop, want cancelled", j.ID, j.State)
		}
	}
}

func TestWebhookRestartKeepsJobs(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, sleepScript())
	n := h.w.issue
	h.mustAccept("issues", h.labeledPayload(n, "gohands", sampleUser))
	first := h.waitState(n, 0, runner.StateRunning)
	body, _ := h.issueComment(n, sampleUser, "@gohands also add a test")
	h.mustAccept("issue_comment", body)

	start := time.Now()
	h.shutdown()
	t.Logf("shutdown with a running job took %v", time.Since(start))
	jobs := mustStoreJobs(t, h.cfg.Store.Path, h.key(n))
	if len(jobs) != 2 || jobs[0].ID != first.ID {
		t.Fatalf("jobs after shutdown = %+v, want the two", jobs)
	}
	for _, j := range jobs {
		if j.State != runner.StateQueued {
			t.Errorf("after shutdown job %s is %s (%s), want queued", j.ID, j.State, j.Reason)
		}
	}
	if got := jobs[1].Latest().Instruction; got != "also add a test" {
		t.Errorf("queued job's instruction = %q", got)
	}

	h.start()
	done := h.waitDone(n)
	if len(done) != 2 {
		t.Fatalf("jobs after restart = %+v, want two", done)
	}
	for _, j := range done {
		if j.State == runner.StateCancelled {
			t.Errorf("job %s was cancelled by the restart: %s", j.ID, j.Reason)
		}
	}
	if done[0].Attempts < 2 {
		t.Errorf("first job attempts = %d, want at least 2 (resumed)", done[0].Attempts)
	}
	if !done[1].StartedAt.After(done[0].FinishedAt) && !done[1].StartedAt.Equal(done[0].FinishedAt) {
		t.Errorf("the follow-up started (%v) before the first finished (%v)", done[1].StartedAt, done[0].FinishedAt)
	}
}

// mustStoreJobs opens the store at dir (no App may have it open), reads the
// jobs of key and closes it.
func mustStoreJobs(tb testing.TB, dir string, key runner.Key) []*runner.Job {
	tb.Helper()
	s, err := runner.OpenStore(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	jobs, err := s.Jobs(key)
	if err != nil {
		tb.Fatal(err)
	}
	return jobs
}

func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	h := mustHarness(t, quickScript())
	n := h.w.issue
	valid, _ := h.issueComment(n, sampleUser, "@gohands fix it")
	post := func(t *testing.T, body []byte, header func(http.Header), chunked bool) int {
		t.Helper()
		req, err := h.w.gh.WebhookRequest(h.url+WebhookPath, "issue_comment", nextDelivery(), body)
		if err != nil {
			t.Fatal(err)
		}
		if header != nil {
			header(req.Header)
		}
		if chunked {
			req.ContentLength = -1
			req.Body = readerOnly{bytes.NewReader(body)}
			req.GetBody = nil
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	huge := append(bytes.Repeat([]byte(" "), MaxWebhookBytes), valid...)
	tests := []struct {
		name    string
		body    []byte
		header  func(http.Header)
		chunked bool
		want    int
	}{
		{"wrong signature", valid, func(hd http.Header) {
			hd.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		}, false, http.StatusUnauthorized},
		{"signature of another body", valid, func(hd http.Header) {
			other, _ := h.w.gh.WebhookRequest(h.url, "issue_comment", "x", []byte(`{}`))
			hd.Set("X-Hub-Signature-256", other.Header.Get("X-Hub-Signature-256"))
		}, false, http.StatusUnauthorized},
		{"missing signature", valid, func(hd http.Header) { hd.Del("X-Hub-Signature-256") }, false, http.StatusUnauthorized},
		{"SHA-1 signature only", valid, func(hd http.Header) {
			hd.Del("X-Hub-Signature-256")
			hd.Set("X-Hub-Signature", "sha1="+strings.Repeat("0", 40))
		}, false, http.StatusUnauthorized},
		{"malformed JSON", []byte(`{"action": "created", "comment": `), nil, false, http.StatusBadRequest},
		{"wrong JSON types", []byte(`{"action": "created", "issue": {"number": "one"}}`), nil, false, http.StatusBadRequest},
		{"no repository", []byte(`{"action": "created", "comment": {"body": "@gohands fix it", "user": {"login": "alice"}}}`), nil, false, http.StatusBadRequest},
		{"over 25 MB", huge, nil, false, http.StatusRequestEntityTooLarge},
		{"over 25 MB, chunked", huge, nil, true, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(t, tt.body, tt.header, tt.chunked); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
			if jobs := h.jobs(n); len(jobs) != 0 {
				t.Fatalf("jobs = %+v, want none", jobs)
			}
		})
	}
	// The same body, correctly signed, is a job: the cases above failed for
	// the reason they name.
	h.mustAccept("issue_comment", valid)
	if jobs := h.jobs(n); len(jobs) != 1 {
		t.Errorf("jobs = %+v, want one for the valid delivery", jobs)
	}
}

// readerOnly hides a reader's length so the client sends it chunked.
type readerOnly struct{ r *bytes.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r readerOnly) Close() error               { return nil }
