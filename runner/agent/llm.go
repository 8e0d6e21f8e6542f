package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sashabaranov/go-openai"
)

// maxBackoff and maxRetryAfter bound the wait between two attempts.
const (
	maxBackoff    = time.Minute
	maxRetryAfter = 5 * time.Minute
)

// llmClient sends chat completion requests, retrying 429, 5xx and time-outs
// with exponential back-off and jitter, honouring Retry-After.
type llmClient struct {
	c              *openai.Client
	model          string
	retryBase      time.Duration
	maxRetries     int
	requestTimeout time.Duration
	// onRetry is told about each failed attempt that will be retried.
	onRetry func(attempt int, delay time.Duration, err error)
}

func newLLMClient(cfg Config) *llmClient {
	oc := openai.DefaultConfig(cfg.APIKey)
	if cfg.BaseURL != "" {
		oc.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	}
	hc := http.Client{}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = hintTransport{base: rt}
	oc.HTTPClient = &hc
	return &llmClient{
		c:              openai.NewClientWithConfig(oc),
		model:          cfg.Model,
		retryBase:      cfg.RetryBase,
		maxRetries:     cfg.MaxRetries,
		requestTimeout: cfg.RequestTimeout,
	}
}

// retryHint carries the Retry-After of an attempt's response from the
// transport to the retry loop (go-openai's errors do not keep headers).
type retryHint struct{ after time.Duration }

type hintKey struct{}

type hintTransport struct{ base http.RoundTripper }

func (t hintTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if resp != nil && resp.StatusCode >= 400 {
		if h, ok := r.Context().Value(hintKey{}).(*retryHint); ok {
			h.after = parseRetryAfter(resp.Header, time.Now())
		}
	}
	return resp, err
}

// parseRetryAfter reads retry-after-ms or Retry-After (seconds or an HTTP date).
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// complete sends one request, retrying transient failures.
func (l *llmClient) complete(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	req.Model = l.model
	for attempt := 0; ; attempt++ {
		hint := &retryHint{}
		actx, cancel := context.WithTimeout(context.WithValue(ctx, hintKey{}, hint), l.requestTimeout)
		resp, err := l.c.CreateChatCompletion(actx, req)
		cancel()
		if err == nil && len(resp.Choices) == 0 {
			err = errEmptyAnswer
		}
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		if !retryable(err) || attempt >= l.maxRetries {
			return resp, fmt.Errorf("model request failed after %d attempt(s): %w", attempt+1, err)
		}
		delay := backoff(l.retryBase, attempt)
		if hint.after > 0 {
			delay = min(hint.after, maxRetryAfter)
		}
		if l.onRetry != nil {
			l.onRetry(attempt+1, delay, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		case <-t.C:
		}
	}
}

var errEmptyAnswer = errors.New("the model answered with no choices")

// backoff is base·2^attempt, capped, with jitter in [d/2, d].
func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 0; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// retryable reports whether a failed request may succeed when sent again.
func retryable(err error) bool {
	if errors.Is(err, errEmptyAnswer) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
		if status == 0 {
			return true
		}
	}
	if status != 0 {
		return status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// ModelErrorHelp turns a failed model request into a sentence for the
// person who asked, naming the setting to check, such as a refused key
// (llm.api_key) or an unknown model (llm.model). The second result is false
// when err is not a model API failure.
func ModelErrorHelp(err error) (string, bool) {
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
		netErr net.Error
		status int
		detail string
	)
	switch {
	case errors.As(err, &apiErr):
		status, detail = apiErr.HTTPStatusCode, apiErr.Message
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	case errors.Is(err, errEmptyAnswer):
		return "The model answered with no choice at all, several times. Check `llm.model` and the provider's status.", true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return fmt.Sprintf("gohands could not get an answer from the model at `llm.base_url` (%s). Check that the address is right and reachable from the gohands host.", rootCause(err)), true
	default:
		return "", false
	}
	if d := strings.TrimSpace(detail); d != "" {
		detail = fmt.Sprintf(" (%.200s)", d)
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fmt.Sprintf("The model provider refused the API key: HTTP %d%s. Check `llm.api_key` (in GitHub Actions, the `OPENAI_API_KEY` secret) and `llm.base_url`.", status, detail), true
	case status == http.StatusNotFound:
		return fmt.Sprintf("The model provider knows no such model or endpoint: HTTP 404%s. Check `llm.model` and `llm.base_url` (it usually ends in `/v1`).", detail), true
	case status == http.StatusTooManyRequests:
		return fmt.Sprintf("The model provider kept limiting the request rate: HTTP 429%s, even after waiting between retries. Try again later, or raise the provider's limits.", detail), true
	case status >= 500:
		return fmt.Sprintf("The model provider kept failing: HTTP %d%s, even after retries. Try again later.", status, detail), true
	case status != 0:
		return fmt.Sprintf("The model provider refused the request: HTTP %d%s. Check `llm.model`, `llm.context_window` and `llm.max_tokens` against what the provider offers.", status, detail), true
	}
	return fmt.Sprintf("The model request failed: %s.", rootCause(err)), true
}

// rootCause is the innermost error's text.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
