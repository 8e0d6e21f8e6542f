package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	gohands "github.com/gohands/gohands"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gohands/gohands/app/apptest"
)

// The manifest that setup posts asks for what deploy/app-manifest.yml documents.
func TestManifestMatchesDeployManifest(t *testing.T) {
	data, err := os.ReadFile("../deploy/app-manifest.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Name               string            `yaml:"name"`
		URL                string            `yaml:"url"`
		Description        string            `yaml:"description"`
		Public             bool              `yaml:"public"`
		DefaultPermissions map[string]string `yaml:"default_permissions"`
		DefaultEvents      []string          `yaml:"default_events"`
		HookAttributes     hookAttributes    `yaml:"hook_attributes"`
		RedirectURL        string            `yaml:"redirect_url"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("deploy/app-manifest.yml: %v", err)
	}
	m := newManifest(setupOptions{name: DefaultAppName}, "http://127.0.0.1:3000/callback")
	if !reflect.DeepEqual(doc.DefaultPermissions, m.DefaultPermissions) {
		t.Errorf("permissions: app-manifest.yml %v, setup %v", doc.DefaultPermissions, m.DefaultPermissions)
	}
	if !reflect.DeepEqual(doc.DefaultEvents, m.DefaultEvents) {
		t.Errorf("events: app-manifest.yml %v, setup %v", doc.DefaultEvents, m.DefaultEvents)
	}
	if doc.Name != m.Name || doc.URL != m.URL || doc.Description != m.Description || doc.Public != m.Public {
		t.Errorf("app-manifest.yml %+v, setup %+v", doc, m)
	}
	if !strings.HasSuffix(doc.HookAttributes.URL, WebhookPath) || !doc.HookAttributes.Active {
		t.Errorf("hook_attributes = %+v, want an active hook ending in %s", doc.HookAttributes, WebhookPath)
	}
	if doc.RedirectURL != m.RedirectURL {
		t.Errorf("redirect_url = %q, want %q", doc.RedirectURL, m.RedirectURL)
	}
}

func TestSetupCreatesConfig(t *testing.T) {
	g := apptest.NewGitHub(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yml")
	ghes := mustGHESProxy(t, g.URL)
	s := mustStartSetup(t, "-config", cfgPath, "-addr", "127.0.0.1:0", "-web-url", "https://ghe.example.com",
		"-api-url", ghes+"/api/v3", "-org", "acme", "-name", "acme-gohands", "-public-url", "https://gohands.example.com/")

	form := s.mustGetForm(t)
	if want := "https://ghe.example.com/organizations/acme/settings/apps/new?state="; !strings.HasPrefix(form.action, want) {
		t.Fatalf("form action = %q, want %s…", form.action, want)
	}
	m := form.manifest
	if m.Name != "acme-gohands" || m.RedirectURL != s.base+"/callback" || m.Public {
		t.Errorf("manifest = %+v", m)
	}
	if m.HookAttributes == nil || m.HookAttributes.URL != "https://gohands.example.com/api/github/hook" || !m.HookAttributes.Active {
		t.Errorf("hook_attributes = %+v", m.HookAttributes)
	}
	wantPerms := map[string]string{"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"}
	if !reflect.DeepEqual(m.DefaultPermissions, wantPerms) {
		t.Errorf("permissions = %v, want %v", m.DefaultPermissions, wantPerms)
	}
	for _, ev := range []string{"issues", "issue_comment", "pull_request_review", "pull_request_review_comment", "repository_dispatch"} {
		if !slices.Contains(m.DefaultEvents, ev) {
			t.Errorf("events %v lack %s", m.DefaultEvents, ev)
		}
	}
	if len(m.DefaultEvents) != 5 {
		t.Errorf("events = %v, want exactly 5", m.DefaultEvents)
	}

	// A callback without the page's state is refused, and the flow goes on.
	g.AddManifestCode("code-1")
	if code, body := s.mustGet(t, "/callback?code=code-1&state=forged"); code != http.StatusBadRequest || !strings.Contains(body, "state") {
		t.Fatalf("forged state: %d %q", code, body)
	}
	if code, body := s.mustGet(t, "/callback?code=code-1&state="+url.QueryEscape(form.state)); code != http.StatusOK || !strings.Contains(body, "installations/new") {
		t.Fatalf("callback: %d %q", code, body)
	}
	if err := s.wait(t); err != nil {
		t.Fatalf("setup: %v\n%s", err, s.out.String())
	}

	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatalf("written config does not load: %v", err)
	}
	if cfg.GitHub.App.IntegrationID != g.AppID || cfg.GitHub.App.WebhookSecret != g.WebhookSecret {
		t.Errorf("app = %+v, want id %d and the emulator's secret", cfg.GitHub.App, g.AppID)
	}
	key, err := cfg.PrivateKey()
	if err != nil || !bytes.Equal(key, g.PrivateKeyPEM) {
		t.Errorf("private key = %q, %v; want the App's", key, err)
	}
	keyPath := filepath.Join(dir, g.Slug+".private-key.pem")
	if cfg.GitHub.App.PrivateKey != keyPath {
		t.Errorf("private_key = %q, want the path %q", cfg.GitHub.App.PrivateKey, keyPath)
	}
	if cfg.GitHub.WebURL != "https://ghe.example.com" || cfg.GitHub.V3APIURL != ghes+"/api/v3/" ||
		cfg.GitHub.V4APIURL != ghes+"/api/graphql" || cfg.Server.PublicURL != "https://gohands.example.com" {
		t.Errorf("urls = %q %q %q %q", cfg.GitHub.WebURL, cfg.GitHub.V3APIURL, cfg.GitHub.V4APIURL, cfg.Server.PublicURL)
	}
	for _, p := range []string{cfgPath, keyPath} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", p, err, fi.Mode().Perm())
		}
	}
	// Only the edited lines differ from the annotated template.
	got, _ := os.ReadFile(cfgPath)
	gotLines, tmplLines := strings.Split(string(got), "\n"), strings.Split(string(gohands.ConfigYML), "\n")
	if len(gotLines) != len(tmplLines) {
		t.Fatalf("config has %d lines, template %d:\n%s", len(gotLines), len(tmplLines), got)
	}
	var changed int
	for i := range gotLines {
		if gotLines[i] != tmplLines[i] {
			changed++
		}
	}
	if changed != 7 {
		t.Errorf("%d lines changed, want 7:\n%s", changed, got)
	}
	out := s.out.String()
	for _, want := range []string{"id 1", keyPath, cfgPath, "/apps/gohands/installations/new", "gohands serve -config"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, g.WebhookSecret) || strings.Contains(out, "PRIVATE KEY") {
		t.Errorf("output shows a secret:\n%s", out)
	}
}

func TestSetupBadCode(t *testing.T) {
	g := apptest.NewGitHub(t)
	cfgPath := filepath.Join(t.TempDir(), "config.yml")
	s := mustStartSetup(t, "-config", cfgPath, "-addr", "127.0.0.1:0", "-api-url", g.URL+"/")
	form := s.mustGetForm(t)
	if want := DefaultWebURL + "/settings/apps/new?state="; !strings.HasPrefix(form.action, want) {
		t.Fatalf("form action = %q, want %s…", form.action, want)
	}
	if form.manifest.HookAttributes != nil {
		t.Errorf("without -public-url the manifest has a hook: %+v", form.manifest.HookAttributes)
	}
	code, body := s.mustGet(t, "/callback?code=never-issued&state="+url.QueryEscape(form.state))
	if code != http.StatusBadGateway || !strings.Contains(body, "not saved") {
		t.Fatalf("bad code: %d %q", code, body)
	}
	err := s.wait(t)
	if err == nil || !strings.Contains(err.Error(), "exchange the manifest code") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err = %v, want a failed exchange naming the 404", err)
	}
	if _, err := os.Stat(cfgPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("config written after a failed exchange: %v", err)
	}
}

func TestSetupWithoutWebhookURL(t *testing.T) {
	g := apptest.NewGitHub(t)
	cfgPath := filepath.Join(t.TempDir(), "gohands.yml")
	if err := os.WriteFile(cfgPath, []byte("# mine\nllm:\n  model: \"my-model\" # keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := mustStartSetup(t, "-config", cfgPath, "-addr", "localhost:0", "-api-url", g.URL)
	form := s.mustGetForm(t)
	if !strings.HasPrefix(form.manifest.RedirectURL, "http://localhost:") {
		t.Errorf("redirect_url = %q, want the host as given in -addr", form.manifest.RedirectURL)
	}
	g.AddManifestCode("c2")
	if code, body := s.mustGet(t, "/callback?code=c2&state="+url.QueryEscape(form.state)); code != http.StatusOK {
		t.Fatalf("callback: %d %q", code, body)
	}
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Model != "my-model" || cfg.GitHub.App.IntegrationID != g.AppID || cfg.GitHub.V4APIURL != g.URL+"/graphql" {
		t.Errorf("config = %+v", cfg)
	}
	got, _ := os.ReadFile(cfgPath)
	if !strings.Contains(string(got), "# mine") || !strings.Contains(string(got), "# keep") {
		t.Errorf("comments lost:\n%s", got)
	}
	if out := s.out.String(); !strings.Contains(out, "no webhook yet") || !strings.Contains(out, "/settings/apps/gohands") {
		t.Errorf("output does not say to set the webhook:\n%s", out)
	}
}

// Stopping setup (Ctrl-C) while the code is being exchanged does not lose
// the App: the code is spent, so setup finishes writing first.
func TestSetupStopDuringExchange(t *testing.T) {
	g := apptest.NewGitHub(t)
	u, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(u)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	cfgPath := filepath.Join(t.TempDir(), "config.yml")
	s := mustStartSetup(t, "-config", cfgPath, "-addr", "127.0.0.1:0", "-api-url", slow.URL)
	form := s.mustGetForm(t)
	g.AddManifestCode("c3")
	go http.Get(s.base + "/callback?code=c3&state=" + url.QueryEscape(form.state))
	<-arrived
	s.cancel()
	time.Sleep(50 * time.Millisecond) // let setup see the cancellation first
	close(release)
	if err := s.wait(t); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if cfg, err := LoadConfig(cfgPath); err != nil || cfg.GitHub.App.IntegrationID != g.AppID {
		t.Fatalf("config after a stop during the exchange: %v", err)
	}
}

func TestSetupFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", []string{}, "-config is required"},
		{"bad org", []string{"-config", "c.yml", "-org", "a/b"}, "-org"},
		{"bad web url", []string{"-config", "c.yml", "-web-url", "github.com"}, "-web-url"},
		{"bad api url", []string{"-config", "c.yml", "-api-url", "ftp://x/"}, "-api-url"},
		{"bad public url", []string{"-config", "c.yml", "-public-url", "nohost"}, "-public-url"},
		{"long name", []string{"-config", "c.yml", "-name", strings.Repeat("n", 35)}, "-name"},
		{"bad addr", []string{"-config", "c.yml", "-addr", "3000"}, "-addr"},
		{"extra args", []string{"-config", "c.yml", "now"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runSetup(context.Background(), tc.args, io.Discard, io.Discard)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error naming %q", err, tc.want)
			}
		})
	}
}

// A config that cannot be edited is refused before the browser opens.
func TestSetupRefusesBadConfig(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfgPath, []byte("github: [1, 2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runSetup(context.Background(), []string{"-config", cfgPath, "-addr", "127.0.0.1:0"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "github is not a mapping") {
		t.Fatalf("err = %v, want one naming github", err)
	}
	if out.Len() != 0 {
		t.Errorf("setup started: %s", out.String())
	}
}

func TestEditConfig(t *testing.T) {
	edits := credentialEdits(setupOptions{webURL: "https://github.com", apiURL: "https://api.github.com/",
		publicURL: "https://g.example.com"}, 42, `s3cr"et`, "/keys/app.pem")
	const pem = "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"
	for _, tc := range []struct {
		name    string
		src     string
		inPlace bool   // only the edited values change in the text
		keep    string // text that must survive
		wantErr string
	}{
		{name: "template", src: string(gohands.ConfigYML), inPlace: true, keep: "# Run: gohands serve -config config.yml\n\nserver:\n"},
		{name: "plain and single-quoted", src: "server:\n  public_url: '' # where\ngithub:\n  web_url: x\n  v3_api_url: 'it''s'\n  v4_api_url: y\n  app:\n    integration_id: 7   # id\n    webhook_secret: z\n    private_key: \"a\\\"b\"\n", inPlace: true, keep: "# where"},
		{name: "missing sections", src: "# top\nllm:\n  model: m # mine\n\nbot:\n  label: x\n", keep: "# mine"},
		{name: "inline PEM", src: "github:\n  app:\n    integration_id: 1\n    webhook_secret: w\n    private_key: |\n      " + strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n      ") + "\n  web_url: u\n", keep: ""},
		{name: "flow style", src: "github: {app: {integration_id: 0}, web_url: w}\n"},
		{name: "null section", src: "github:\nserver:\n"},
		{name: "empty", src: ""},
		{name: "only a comment", src: "# nothing yet\n"},
		{name: "list", src: "- a\n- b\n", wantErr: "not a mapping"},
		{name: "scalar section", src: "github: 5\n", wantErr: "github is not a mapping"},
		{name: "broken", src: "github: [\n", wantErr: "parse config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := editConfig([]byte(tc.src), edits)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseConfig(out)
			if err != nil {
				t.Fatalf("result does not parse: %v\n%s", err, out)
			}
			a := cfg.GitHub.App
			if a.IntegrationID != 42 || a.WebhookSecret != `s3cr"et` || a.PrivateKey != "/keys/app.pem" ||
				cfg.GitHub.WebURL != "https://github.com" || cfg.GitHub.V3APIURL != "https://api.github.com/" ||
				cfg.GitHub.V4APIURL != "https://api.github.com/graphql" || cfg.Server.PublicURL != "https://g.example.com" {
				t.Errorf("config = %+v %+v\n%s", cfg.GitHub, cfg.Server, out)
			}
			if !strings.Contains(string(out), tc.keep) {
				t.Errorf("lost %q:\n%s", tc.keep, out)
			}
			srcLines, outLines := strings.Split(tc.src, "\n"), strings.Split(string(out), "\n")
			if tc.inPlace && len(srcLines) != len(outLines) {
				t.Errorf("not edited in place: %d lines became %d:\n%s", len(srcLines), len(outLines), out)
			}
		})
	}
}

func TestGraphQLURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.github.com/":          "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3/":  "https://ghe.example.com/api/graphql",
		"https://ghe.example.com/api/v3":   "https://ghe.example.com/api/graphql",
		"http://127.0.0.1:8080/":           "http://127.0.0.1:8080/graphql",
		"https://proxy.example.com/github": "https://proxy.example.com/github/graphql",
	} {
		if got := graphQLURL(in); got != want {
			t.Errorf("graphQLURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// mustGHESProxy serves the GitHub emulator under /api/v3, where GitHub
// Enterprise Server has its REST API, and returns the proxy's URL.
func mustGHESProxy(tb testing.TB, target string) string {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/api/v3", httputil.NewSingleHostReverseProxy(u)))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// setupRun is a gohands setup running in the background.
type setupRun struct {
	base   string
	out    *syncBuffer
	done   chan error
	cancel context.CancelFunc
}

type setupForm struct {
	action, state string
	manifest      appManifest
}

// mustStartSetup runs gohands setup with args until it prints its page's
// address; the run is stopped when the test ends.
func mustStartSetup(tb testing.TB, args ...string) *setupRun {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &setupRun{out: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	go func() { s.done <- runSetup(ctx, args, s.out, io.Discard) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			tb.Error("setup did not stop")
		}
	})
	open := regexp.MustCompile(`Open (http://\S+)/ in a browser`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := open.FindStringSubmatch(s.out.String()); m != nil {
			s.base = m[1]
			return s
		}
		select {
		case err := <-s.done:
			tb.Fatalf("setup ended before serving its page: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	tb.Fatalf("setup did not print its address:\n%s", s.out.String())
	return nil
}

func (s *setupRun) mustGet(tb testing.TB, path string) (int, string) {
	tb.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

var (
	formAction    = regexp.MustCompile(`<form id="manifest" method="post" action="([^"]*)">`)
	manifestInput = regexp.MustCompile(`<input type="hidden" name="manifest" value="([^"]*)">`)
)

// mustGetForm loads the setup page and reads the form it posts to GitHub.
func (s *setupRun) mustGetForm(tb testing.TB) setupForm {
	tb.Helper()
	code, page := s.mustGet(tb, "/")
	if code != http.StatusOK {
		tb.Fatalf("GET /: %d", code)
	}
	a, m := formAction.FindStringSubmatch(page), manifestInput.FindStringSubmatch(page)
	if a == nil || m == nil || !strings.Contains(page, ".submit()") {
		tb.Fatalf("no auto-posting manifest form in the page:\n%s", page)
	}
	var f setupForm
	f.action = html.UnescapeString(a[1])
	u, err := url.Parse(f.action)
	if err != nil {
		tb.Fatalf("form action %q: %v", f.action, err)
	}
	f.state = u.Query().Get("state")
	if f.state == "" {
		tb.Fatalf("form action %q has no state", f.action)
	}
	dec := json.NewDecoder(strings.NewReader(html.UnescapeString(m[1])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.manifest); err != nil {
		tb.Fatalf("manifest in the page: %v\n%s", err, m[1])
	}
	return f
}

func (s *setupRun) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		tb.Fatal("setup did not finish after the callback")
		return nil
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
