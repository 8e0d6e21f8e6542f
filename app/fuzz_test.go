package app

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// fuzzEvents are the event names FuzzWebhook posts under: every event a
// handler takes, ping, and one nobody handles.
var fuzzEvents = []string{
	"issues", "issue_comment", "pull_request_review_comment", "pull_request_review",
	"workflow_dispatch", "repository_dispatch", "installation", "installation_repositories",
	"ping", "pull_request", "star",
}

// FuzzWebhook posts arbitrary bodies, signed or not, under each event name
// to the App's handler. Whatever the body, the App must not panic and must
// answer 200, 202, 400, 401 or 413; a 500 is allowed only for well-formed
// JSON (a handler got far enough to call the emulator, and that call failed,
// e.g. for an installation it does not know). The seeds are the real
// payloads in testdata/webhooks, as they are and retargeted at the world.
func FuzzWebhook(f *testing.F) {
	dir := f.TempDir()
	w, err := startWorld(dir)
	if err != nil {
		f.Fatalf("start world: %v", err)
	}
	f.Cleanup(w.close)
	cfg := w.config(filepath.Join(dir, "data"))
	cfg.Sandbox.Driver = "process"
	a, err := New(context.Background(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Instance: "fuzz"})
	if err != nil {
		f.Fatalf("app.New: %v", err)
	}
	f.Cleanup(func() { a.Close() })
	handler := a.Handler()

	files, err := filepath.Glob(filepath.Join("..", "testdata", "webhooks", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed payloads: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		event, _, _ := strings.Cut(filepath.Base(file), ".")
		which := uint8(indexOf(fuzzEvents, event))
		f.Add(which, data, true)
		f.Add(which, data, false)
		f.Add(which, retargetSeed(f, w, data), true)
	}
	f.Add(uint8(1), []byte(`{"action":"created","issue":{"number":1},"comment":{"body":"@gohands fix it","user":{"login":"alice"}},"repository":{"name":"greet","owner":{"login":"octo-org"}},"installation":{"id":1}}`), true)
	f.Add(uint8(5), []byte(`{"action":"gohands","client_payload":{"issue_number":"#1","prompt":"x"},"repository":{"name":"greet","owner":{"login":"octo-org"}},"sender":{"login":"alice"},"installation":{"id":1}}`), true)
	f.Add(uint8(4), []byte(`{"inputs":{"issue_number":"1","pr_number":"2"},"repository":{"name":"greet","owner":{"login":"octo-org"}},"sender":{"login":"alice"}}`), true)

	var delivery atomic.Int64
	f.Fuzz(func(t *testing.T, which uint8, body []byte, signed bool) {
		event := fuzzEvents[int(which)%len(fuzzEvents)]
		req := httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", "fuzz-"+strconv.FormatInt(delivery.Add(1), 10))
		if signed {
			req.Header.Set("X-Hub-Signature-256", signBody(w.gh.WebhookSecret, body))
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		switch got := rec.Code; {
		case !signed && got != http.StatusUnauthorized:
			t.Fatalf("%s, unsigned: status %d, want 401", event, got)
		case got == http.StatusOK && event != "ping":
			t.Fatalf("%s: status 200 is for ping only", event)
		case got == http.StatusInternalServerError && !json.Valid(body):
			t.Fatalf("%s: status 500 for a body that is not JSON: %s", event, rec.Body.String())
		case got == http.StatusInternalServerError && !strings.Contains(rec.Body.String(), "see the gohands log"):
			t.Fatalf("%s: status 500 not from the error callback: %s", event, rec.Body.String())
		case got != http.StatusOK && got != http.StatusAccepted && got != http.StatusBadRequest &&
			got != http.StatusUnauthorized && got != http.StatusRequestEntityTooLarge && got != http.StatusInternalServerError:
			t.Fatalf("%s: status %d, want one of 200, 202, 400, 401, 413", event, got)
		}
	})
}

// retargetSeed points a real payload at the world's repository, its
// installation and a sender with write access, so seeds reach the queue.
func retargetSeed(tb testing.TB, w *world, data []byte) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	set(m, "repository.name", sampleRepo)
	set(m, "repository.owner.login", sampleOwner)
	set(m, "installation", map[string]any{"id": w.gh.InstallationID})
	set(m, "sender.login", sampleUser)
	if c, ok := m["comment"].(map[string]any); ok {
		c["body"] = "@gohands fix it"
	}
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// signBody is GitHub's X-Hub-Signature-256 of body.
func signBody(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return len(list) - 1
}
