package publish

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/go-github/v66/github"
)

// The reactions gohands uses: 👀 when it starts, 🚀 on success, 😕 on failure.
const (
	ReactionEyes     = "eyes"
	ReactionRocket   = "rocket"
	ReactionConfused = "confused"
)

var reactionContents = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

// TargetKind says what a reaction is put on.
type TargetKind int

// The things gohands reacts to.
const (
	TargetIssue         TargetKind = iota // the issue or PR itself
	TargetIssueComment                    // a conversation comment
	TargetReviewComment                   // an inline review comment
)

// Target is what React puts a reaction on; ID is the comment's id for comment kinds.
type Target struct {
	Kind TargetKind
	ID   int64
}

// TriggerTarget is where reactions to a request go: the issue comment or
// the review comment that asked, else the issue or PR itself.
func TriggerTarget(commentID, reviewCommentID int64) Target {
	switch {
	case commentID != 0:
		return Target{Kind: TargetIssueComment, ID: commentID}
	case reviewCommentID != 0:
		return Target{Kind: TargetReviewComment, ID: reviewCommentID}
	}
	return Target{Kind: TargetIssue}
}

// React puts a reaction (eyes, rocket, confused, or any of GitHub's) on the
// issue or PR of key, or on one of its comments. Reacting twice is harmless.
func React(ctx context.Context, client *github.Client, key Key, target Target, content string) error {
	if !slices.Contains(reactionContents, content) {
		return fmt.Errorf("react on %s: unknown reaction %q (want one of %v)", key, content, reactionContents)
	}
	var err error
	switch target.Kind {
	case TargetIssue:
		_, _, err = client.Reactions.CreateIssueReaction(ctx, key.Owner, key.Repo, key.Number, content)
	case TargetIssueComment:
		if target.ID == 0 {
			return fmt.Errorf("react on %s: issue comment target without an id", key)
		}
		_, _, err = client.Reactions.CreateIssueCommentReaction(ctx, key.Owner, key.Repo, target.ID, content)
	case TargetReviewComment:
		if target.ID == 0 {
			return fmt.Errorf("react on %s: review comment target without an id", key)
		}
		_, _, err = client.Reactions.CreatePullRequestCommentReaction(ctx, key.Owner, key.Repo, target.ID, content)
	default:
		return fmt.Errorf("react on %s: unknown target kind %d", key, target.Kind)
	}
	if err != nil {
		return fmt.Errorf("react %s on %s: %w", content, key, err)
	}
	return nil
}

// ReplyTarget says where Reply answers: in the thread of an inline review
// comment when ReviewCommentID is set, else in the conversation.
type ReplyTarget struct {
	ReviewCommentID int64
}

// Reply answers on the issue or PR of key, masked by mask, and returns the new comment's URL.
func Reply(ctx context.Context, client *github.Client, key Key, target ReplyTarget, body string, mask Masker) (string, error) {
	body = mask.apply(body)
	if body == "" {
		return "", fmt.Errorf("reply on %s: empty body", key)
	}
	if target.ReviewCommentID != 0 {
		c, _, err := client.PullRequests.CreateCommentInReplyTo(ctx, key.Owner, key.Repo, key.Number, body, target.ReviewCommentID)
		if err != nil {
			return "", fmt.Errorf("reply to review comment %d on %s: %w", target.ReviewCommentID, key, err)
		}
		return c.GetHTMLURL(), nil
	}
	c, _, err := client.Issues.CreateComment(ctx, key.Owner, key.Repo, key.Number, &github.IssueComment{Body: github.String(body)})
	if err != nil {
		return "", fmt.Errorf("reply on %s: %w", key, err)
	}
	return c.GetHTMLURL(), nil
}
