package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/gohands/gohands/app/apptest"
)

func ExampleMasker() {
	m := NewMasker("ghs_abc123secret", "")
	fmt.Println(m.Mask("token=ghs_abc123secret"))
	fmt.Println(m.Mask(base64.StdEncoding.EncodeToString([]byte("ghs_abc123secret"))))
	// Output:
	// token=***
	// ***
}

func TestMasker(t *testing.T) {
	m := NewMasker("abc", "secret-one", "secret-one-longer", " padded-secret ")
	tests := []struct{ in, want string }{
		{"abc stays: too short", "abc stays: too short"},
		{"x secret-one y", "x *** y"},
		{"secret-one-longer", "***"},
		{"padded-secret", "***"},
		{base64.RawURLEncoding.EncodeToString([]byte("secret-one")), "***"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := m.Mask(tt.in); got != tt.want {
			t.Errorf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var nilMasker *Masker
	if nilMasker.Mask("x") != "x" || NewMasker().Mask("x") != "x" {
		t.Error("empty maskers changed text")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-1"}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{}, 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.h, now); got != tt.want {
			t.Errorf("parseRetryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for attempt := range 12 {
		d := backoff(100*time.Millisecond, attempt)
		hi := min(100*time.Millisecond<<attempt, maxBackoff)
		if d < hi/2 || d > hi {
			t.Errorf("attempt %d: %v outside [%v, %v]", attempt, d, hi/2, hi)
		}
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&openai.APIError{HTTPStatusCode: 429}, true},
		{&openai.APIError{HTTPStatusCode: 500}, true},
		{&openai.APIError{HTTPStatusCode: 400}, false},
		{&openai.APIError{HTTPStatusCode: 401}, false},
		{&openai.RequestError{HTTPStatusCode: 502}, true},
		{&openai.RequestError{HTTPStatusCode: 404}, false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true},
		{errors.New("something else"), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestTruncateMiddle(t *testing.T) {
	s := strings.Repeat("a", 50) + strings.Repeat("é", 50) + strings.Repeat("z", 50)
	got := truncateMiddle(s, 60)
	if !strings.HasPrefix(got, strings.Repeat("a", 30)) || !strings.HasSuffix(got, strings.Repeat("z", 30)) || !strings.Contains(got, "characters cut") {
		t.Fatalf("truncateMiddle = %q", got)
	}
	if truncateMiddle("short", 60) != "short" || truncateMiddle(s, 0) != s {
		t.Fatal("short or unlimited text changed")
	}
	mixed := truncateMiddle(strings.Repeat("é", 100), 51)
	if !strings.Contains(mixed, "characters cut") || strings.ContainsRune(mixed, '\uFFFD') {
		t.Fatalf("cut inside a rune: %q", mixed)
	}
}

func TestDecodeFlexibleArgs(t *testing.T) {
	var a terminalArgs
	if err := decodeArgs(`{"command":"ls","is_input":"true","timeout":"2.5","reset":false}`, &a); err != nil {
		t.Fatal(err)
	}
	if *a.Command != "ls" || !bool(a.IsInput) || a.Timeout.v != 2.5 || bool(a.Reset) {
		t.Fatalf("args = %+v", a)
	}
	for _, bad := range []string{`{"is_input":"maybe"}`, `{"timeout":"soon"}`, `{"timeout":"NaN"}`, `[1]`, `{`} {
		if err := decodeArgs(bad, &terminalArgs{}); err == nil {
			t.Errorf("decodeArgs(%s) accepted", bad)
		}
	}
	var e editorArgs
	if err := decodeArgs(`{"command":"view","path":"/x","view_range":"[1, -1]","insert_line":"3"}`, &e); err != nil || len(*e.ViewRange) != 2 || e.InsertLine.v != 3 {
		t.Fatalf("editor args = %+v, %v", e, err)
	}
	if err := decodeArgs("", &e); err != nil {
		t.Fatalf("empty arguments: %v", err)
	}
}

// failingLog fails after n appends.
type failingLog struct{ n int }

func (l *failingLog) Append(context.Context, Event) error {
	if l.n <= 0 {
		return errors.New("store closed")
	}
	l.n--
	return nil
}

func TestEventLogFailureStops(t *testing.T) {
	sb := mustSandbox(t, nil)
	llm := apptest.NewLLM(t, apptest.LLMTool("think", map[string]any{"thought": "a"}), finishStep("x"))
	res, err := Run(context.Background(), testConfig(llm), sb, Task{User: "go"}, &failingLog{n: 3}, Hooks{})
	if err == nil || res.Stop != StopEventLog || !strings.Contains(err.Error(), "store closed") {
		t.Fatalf("err %v, result %+v", err, res)
	}
}
