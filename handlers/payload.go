package handlers

import (
	"encoding/json"

	"github.com/gohands/gohands/runner"
)

// The handlers decode webhooks into the types below, which hold only the
// fields gohands reads, rather than into go-github's event types. A payload
// carries the whole repository, issue and every user involved, with dozens
// of URLs each; decoding all of that into pointers was the largest share of
// a delivery's allocations, and so of the garbage collector's work on a
// busy server. The JSON is still checked in full: a syntax error anywhere,
// or a wrong type in a field read here, is a malformed payload.

// user is a GitHub account: a person, an organization or a bot.
type user struct {
	Login string `json:"login"`
	Type  string `json:"type"` // "User", "Organization" or "Bot"
}

// repository names a repository by its owner and name.
type repository struct {
	Name  string `json:"name"`
	Owner user   `json:"owner"`
}

// installation is the App's installation that a webhook is for.
type installation struct {
	ID      int64 `json:"id"`
	Account user  `json:"account"`
}

// envelope holds the fields every event the handlers take carries.
type envelope struct {
	Action       string       `json:"action"`
	Repo         repository   `json:"repository"`
	Installation installation `json:"installation"`
	Sender       user         `json:"sender"`
}

// issue is an issue or, when PullRequest is set, a pull request's
// conversation.
type issue struct {
	Number      int       `json:"number"`
	Title       string    `json:"title"`
	Body        string    `json:"body"`
	PullRequest *struct{} `json:"pull_request"`
}

// isPullRequest reports whether the issue is a pull request, as go-github's
// Issue.IsPullRequest does.
func (i issue) isPullRequest() bool { return i.PullRequest != nil }

// pullRequest is a pull request.
type pullRequest struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
}

// seen is the text of an issue or pull request as the event shows it.
func seen(title, body string) *runner.Seen { return &runner.Seen{Title: title, Body: body} }

// comment is an issue comment, a review comment or a review.
type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User user   `json:"user"`
	// PullRequestReviewID is the review a review comment belongs to.
	PullRequestReviewID int64 `json:"pull_request_review_id"`
}

// issuesEvent is an issues webhook.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#issues
type issuesEvent struct {
	envelope
	Issue issue `json:"issue"`
	Label struct {
		Name string `json:"name"`
	} `json:"label"`
	Assignee user `json:"assignee"`
}

// issueCommentEvent is an issue_comment webhook.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#issue_comment
type issueCommentEvent struct {
	envelope
	Issue   issue   `json:"issue"`
	Comment comment `json:"comment"`
}

// reviewCommentEvent is a pull_request_review_comment webhook.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request_review_comment
type reviewCommentEvent struct {
	envelope
	PullRequest pullRequest `json:"pull_request"`
	Comment     comment     `json:"comment"`
}

// reviewEvent is a pull_request_review webhook.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request_review
type reviewEvent struct {
	envelope
	PullRequest pullRequest `json:"pull_request"`
	Review      comment     `json:"review"`
}

// workflowDispatchEvent is a workflow_dispatch webhook.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#workflow_dispatch
type workflowDispatchEvent struct {
	envelope
	Inputs json.RawMessage `json:"inputs"`
}

// repositoryDispatchEvent is a repository_dispatch webhook; its action is
// the dispatch's event type.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#repository_dispatch
type repositoryDispatchEvent struct {
	envelope
	ClientPayload json.RawMessage `json:"client_payload"`
}

// installationEvent is an installation or installation_repositories
// webhook; only the number of repositories is logged.
// https://docs.github.com/en/webhooks/webhook-events-and-payloads#installation
type installationEvent struct {
	envelope
	Added        []struct{} `json:"repositories_added"`
	Removed      []struct{} `json:"repositories_removed"`
	Repositories []struct{} `json:"repositories"`
}
