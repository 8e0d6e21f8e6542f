// Package publish writes a job's results to GitHub through go-github: the
// tracking comment, reactions, the pull request, replies. It also reads what
// a job needs from GitHub (issue and PR context, permissions).
//
// It does not import package runner, so that runner can import it: Key has
// the same fields as runner.Key and converts with publish.Key(job.Key).
package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// Key identifies an issue or pull request: the same shape as runner.Key.
type Key struct {
	Owner  string `json:"owner"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

// String formats the key as owner/repo#number.
func (k Key) String() string { return fmt.Sprintf("%s/%s#%d", k.Owner, k.Repo, k.Number) }

// Masker hides secrets in text before it is written to GitHub; the runner
// passes agent.Masker.Mask. A nil Masker leaves text unchanged.
type Masker func(string) string

func (m Masker) apply(s string) string {
	if m == nil {
		return s
	}
	return m(s)
}

// Backoff says how read calls that fail with a 5xx or a network error are retried.
type Backoff struct {
	// Attempts is the total number of tries, at least 1.
	Attempts int
	// Base is the wait before the second try; it doubles for each further one.
	Base time.Duration
}

// DefaultBackoff is used when no WithBackoff option is given.
var DefaultBackoff = Backoff{Attempts: 3, Base: 500 * time.Millisecond}

// Option adjusts how a read from GitHub is done.
type Option func(*options)

type options struct {
	backoff Backoff
}

// WithBackoff sets the retry policy of reads (permissions, issue and PR context).
func WithBackoff(b Backoff) Option {
	return func(o *options) { o.backoff = b }
}

func buildOptions(opts []Option) options {
	o := options{backoff: DefaultBackoff}
	for _, f := range opts {
		f(&o)
	}
	o.backoff.Attempts = max(o.backoff.Attempts, 1)
	return o
}

// retryable reports whether err is worth another try: a server error or no
// response at all, but not a cancelled context or a rate limit.
func retryable(ctx context.Context, resp *github.Response, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return false
	}
	if resp == nil || resp.Response == nil {
		return true
	}
	return resp.StatusCode >= 500
}

// withRetry calls fn until it succeeds, fails for good, or runs out of attempts.
func withRetry[T any](ctx context.Context, b Backoff, fn func() (T, *github.Response, error)) (T, *github.Response, error) {
	delay := b.Base
	for attempt := 1; ; attempt++ {
		v, resp, err := fn()
		if attempt >= b.Attempts || !retryable(ctx, resp, err) {
			return v, resp, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, resp, err
		case <-t.C:
		}
		delay *= 2
	}
}

func statusCode(resp *github.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}

// isBot reports whether a GitHub user is a bot (an App or a machine account
// GitHub marks as such).
func isBot(u *github.User) bool {
	return u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]")
}

// listAll fetches every page of a go-github list call.
func listAll[T any](ctx context.Context, b Backoff, list func(page int) ([]T, *github.Response, error)) ([]T, error) {
	var all []T
	page := 1
	for {
		items, resp, err := withRetry(ctx, b, func() ([]T, *github.Response, error) { return list(page) })
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if resp.NextPage == 0 {
			return all, nil
		}
		page = resp.NextPage
	}
}
