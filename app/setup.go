package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	gohands "github.com/gohands/gohands"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v66/github"
	"gopkg.in/yaml.v3"
)

// Defaults of gohands setup's flags.
const (
	DefaultSetupAddress = "127.0.0.1:3000"
	DefaultAppName      = "gohands"
)

// The GitHub App that gohands setup registers. deploy/app-manifest.yml says
// why each permission and event is needed; setup_test.go keeps the two equal.
var (
	manifestPermissions = map[string]string{
		"contents":      "write",
		"pull_requests": "write",
		"issues":        "write",
		"metadata":      "read",
	}
	manifestEvents = []string{
		"issues",
		"issue_comment",
		"pull_request_review",
		"pull_request_review_comment",
		"repository_dispatch",
	}
)

const (
	manifestHomepage    = "https://github.com/gohands/gohands"
	manifestDescription = "An AI coding agent that turns issues and comments into pull requests."
	setupCallbackPath   = "/callback"
	// maxAppName is GitHub's limit on an App's name.
	maxAppName = 34
	// exchangeTimeout bounds the code exchange and the writing of the files,
	// which go on even if the browser goes away: the code works only once.
	exchangeTimeout = time.Minute
)

// appManifest is a GitHub App manifest, posted as JSON in the "manifest" form
// field. https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
type appManifest struct {
	Name               string            `json:"name"`
	URL                string            `json:"url"`
	Description        string            `json:"description,omitempty"`
	Public             bool              `json:"public"`
	HookAttributes     *hookAttributes   `json:"hook_attributes,omitempty"`
	RedirectURL        string            `json:"redirect_url"`
	DefaultPermissions map[string]string `json:"default_permissions"`
	DefaultEvents      []string          `json:"default_events"`
}

type hookAttributes struct {
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// setupOptions are gohands setup's flags.
type setupOptions struct {
	configPath string
	addr       string
	webURL     string
	apiURL     string
	org        string
	name       string
	publicURL  string
}

var orgName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)

func parseSetupFlags(args []string, stderr io.Writer) (setupOptions, error) {
	var o setupOptions
	fs := newFlags("setup", stderr)
	fs.StringVar(&o.configPath, "config", "", "the configuration file to write the App's id, key path and webhook secret into (created from the annotated template when missing)")
	fs.StringVar(&o.addr, "addr", DefaultSetupAddress, "where the local setup page listens; GitHub sends the browser back here")
	fs.StringVar(&o.webURL, "web-url", DefaultWebURL, "GitHub's web URL (GitHub Enterprise Server: https://HOST)")
	fs.StringVar(&o.apiURL, "api-url", DefaultV3APIURL, "GitHub's REST API URL (GitHub Enterprise Server: https://HOST/api/v3/)")
	fs.StringVar(&o.org, "org", "", "register the App under this organization instead of your user account")
	fs.StringVar(&o.name, "name", DefaultAppName, "the App's name (unique on GitHub; the bot is @<slug>)")
	fs.StringVar(&o.publicURL, "public-url", "", "where GitHub reaches this gohands server; webhooks go to <public-url>/api/github/hook")
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	var errs []error
	if o.configPath == "" {
		errs = append(errs, errors.New("-config is required: the file to write the App's credentials into"))
	}
	for _, u := range []struct{ flag, val string }{{"-web-url", o.webURL}, {"-api-url", o.apiURL}} {
		if err := checkURL(u.val); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.flag, err))
		}
	}
	if o.publicURL != "" {
		if err := checkURL(o.publicURL); err != nil {
			errs = append(errs, fmt.Errorf("-public-url: %w", err))
		}
	}
	if o.org != "" && !orgName.MatchString(o.org) {
		errs = append(errs, fmt.Errorf("-org: %q is not an organization name", o.org))
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(o.name)); n == 0 || n > maxAppName {
		errs = append(errs, fmt.Errorf("-name: %q must have 1 to %d characters", o.name, maxAppName))
	}
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		errs = append(errs, fmt.Errorf("-addr: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return o, usageError{err}
	}
	o.webURL = strings.TrimRight(o.webURL, "/")
	if !strings.HasSuffix(o.apiURL, "/") {
		o.apiURL += "/"
	}
	o.publicURL = strings.TrimRight(o.publicURL, "/")
	return o, nil
}

// runSetup registers the GitHub App from its manifest: it serves a local page
// that posts the manifest to GitHub, receives the one-time code on the
// callback, exchanges it for the App's credentials and writes them into the
// configuration file.
func runSetup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSetupFlags(args, stderr)
	if err != nil {
		return err
	}
	// Read and check the configuration before anyone creates an App: the
	// code GitHub returns can be exchanged only once.
	path, src, err := readConfigForSetup(o.configPath)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	f, err := newSetupFlow(o, path, src, ln.Addr(), &http.Client{Timeout: exchangeTimeout})
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	fmt.Fprintf(stdout, "Open %s/ in a browser to create the GitHub App %q on %s.\n", f.baseURL, o.name, o.webURL)
	fmt.Fprintf(stdout, "Waiting for GitHub to send the browser back to %s (Ctrl-C to stop).\n", f.manifest.RedirectURL)

	var res setupResult
	select {
	case res = <-f.result:
	case err := <-serveErr:
		return fmt.Errorf("setup page: %w", err)
	case <-ctx.Done():
		// A callback in progress holds the lock until its result is sent:
		// let it finish, since its one-time code is already spent.
		f.mu.Lock()
		started := f.done
		f.mu.Unlock()
		if !started {
			srv.Close()
			return fmt.Errorf("setup stopped before the App was created: %w", ctx.Err())
		}
		res = <-f.result
	}
	// The callback's page is being written; give it a moment, then stop.
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx) // only the browser's last page is at stake
	if res.err != nil {
		return res.err
	}
	res.report(stdout, o)
	return nil
}

// readConfigForSetup returns the real path of the configuration file and its
// contents, or the annotated template when there is no file yet, after
// checking that setup will be able to rewrite it.
func readConfigForSetup(p string) (string, []byte, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", nil, fmt.Errorf("-config: %w", err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	src, err := os.ReadFile(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		src = gohands.ConfigYML
	case err != nil:
		return "", nil, fmt.Errorf("read config: %w", err)
	}
	// A dry run with placeholder values: a file that cannot be edited fails now.
	if _, err := editConfig(src, credentialEdits(setupOptions{webURL: DefaultWebURL, apiURL: DefaultV3APIURL}, 1, "x", "x")); err != nil {
		return "", nil, fmt.Errorf("%s: %w", abs, err)
	}
	probe, err := os.CreateTemp(filepath.Dir(abs), ".gohands-setup-*")
	if err != nil {
		return "", nil, fmt.Errorf("config directory is not writable: %w", err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return abs, src, nil
}

// setupFlow is the local web server of the manifest flow.
type setupFlow struct {
	opts       setupOptions
	configPath string
	src        []byte
	baseURL    string
	manifest   appManifest
	manifestJS []byte
	formAction string
	state      string
	gh         *github.Client

	mu     sync.Mutex
	done   bool
	result chan setupResult
}

type setupResult struct {
	app        *github.AppConfig
	configPath string
	keyPath    string
	// ownSecret is set when GitHub returned no webhook secret (no webhook
	// URL yet) and setup made one up, to be entered on the App's page.
	ownSecret bool
	err       error
}

func newSetupFlow(o setupOptions, configPath string, src []byte, addr net.Addr, hc *http.Client) (*setupFlow, error) {
	// The browser comes back to the host as the user wrote it (a name
	// stays a name), on the port actually bound (for -addr HOST:0).
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil, fmt.Errorf("-addr: %w", err)
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return nil, fmt.Errorf("-addr: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	f := &setupFlow{
		opts:       o,
		configPath: configPath,
		src:        src,
		baseURL:    "http://" + net.JoinHostPort(host, port),
		state:      rand.Text(),
		result:     make(chan setupResult, 1),
	}
	f.manifest = newManifest(o, f.baseURL+setupCallbackPath)
	f.manifestJS, err = json.Marshal(f.manifest)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	newApp := o.webURL + "/settings/apps/new"
	if o.org != "" {
		newApp = o.webURL + "/organizations/" + url.PathEscape(o.org) + "/settings/apps/new"
	}
	f.formAction = newApp + "?state=" + url.QueryEscape(f.state)
	api, err := url.Parse(o.apiURL)
	if err != nil {
		return nil, fmt.Errorf("-api-url: %w", err)
	}
	f.gh = github.NewClient(hc)
	f.gh.BaseURL = api
	return f, nil
}

func newManifest(o setupOptions, redirect string) appManifest {
	m := appManifest{
		Name:               o.name,
		URL:                manifestHomepage,
		Description:        manifestDescription,
		RedirectURL:        redirect,
		DefaultPermissions: manifestPermissions,
		DefaultEvents:      manifestEvents,
	}
	if o.publicURL != "" {
		m.URL = o.publicURL
		m.HookAttributes = &hookAttributes{URL: o.publicURL + WebhookPath, Active: true}
	}
	return m
}

func (f *setupFlow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		f.servePage(w)
	case r.URL.Path == setupCallbackPath && r.Method == http.MethodGet:
		f.serveCallback(w, r)
	default:
		http.NotFound(w, r)
	}
}

var setupPage = template.Must(template.New("setup").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>gohands setup</title></head>
<body>
<h1>Create the {{.Name}} GitHub App</h1>
<p>This page sends the App's manifest to GitHub. There you choose its name and press
"Create GitHub App"; GitHub then sends you back here and gohands saves the App's credentials.</p>
<form id="manifest" method="post" action="{{.Action}}">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Continue to GitHub</button>
</form>
<script>document.getElementById("manifest").submit();</script>
</body>
</html>
`))

var setupDonePage = template.Must(template.New("done").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>gohands setup</title></head>
<body>
{{if .Err}}<h1>The App's credentials were not saved</h1>
<p>{{.Err}}</p>
{{else}}<h1>{{.Name}} is ready</h1>
<p>Its id, private key and webhook secret are saved in {{.Config}}. You can close this page.</p>
<p>Next: <a href="{{.Install}}">install the App on the repositories it may work on</a>.</p>
{{end}}</body>
</html>
`))

func (f *setupFlow) servePage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// An error here is a browser gone away; the page can be loaded again.
	_ = setupPage.Execute(w, map[string]string{
		"Name":     f.manifest.Name,
		"Action":   f.formAction,
		"Manifest": string(f.manifestJS),
	})
}

// manifestCode matches the codes GitHub puts in the redirect; anything else
// is refused before it reaches a URL path.
var manifestCode = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (f *setupFlow) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("state") != f.state {
		http.Error(w, "gohands setup: the state parameter does not match this setup's; start again from the setup page", http.StatusBadRequest)
		return
	}
	code := q.Get("code")
	if !manifestCode.MatchString(code) {
		http.Error(w, "gohands setup: the callback has no valid code parameter", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		http.Error(w, "gohands setup: this setup is already finished", http.StatusGone)
		return
	}
	f.done = true
	// Not the request's context: a closed browser tab must not lose an App
	// whose one-time code is already spent.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), exchangeTimeout)
	defer cancel()
	res := f.complete(ctx, code)
	page := map[string]string{"Config": res.configPath}
	status := http.StatusOK
	if res.err != nil {
		page["Err"] = res.err.Error()
		status = http.StatusBadGateway
	} else {
		page["Name"] = res.app.GetName()
		page["Install"] = installURL(res.app, f.opts.webURL)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = setupDonePage.Execute(w, page) // the result goes to the terminal too
	f.result <- res
}

// complete exchanges the code for the App's credentials and writes them.
func (f *setupFlow) complete(ctx context.Context, code string) setupResult {
	app, _, err := f.gh.Apps.CompleteAppManifest(ctx, code)
	if err != nil {
		return setupResult{err: fmt.Errorf("exchange the manifest code at %s: %w (a code works once, for one hour: run gohands setup again)", f.opts.apiURL, err)}
	}
	if app.GetID() <= 0 || app.GetPEM() == "" {
		return setupResult{err: fmt.Errorf("exchange the manifest code at %s: the answer has no App id or private key", f.opts.apiURL)}
	}
	res := setupResult{app: app, configPath: f.configPath}
	secret := app.GetWebhookSecret()
	if secret == "" {
		secret = rand.Text()
		res.ownSecret = true
	}
	res.keyPath, err = writeKeyFile(f.configPath, app)
	if err != nil {
		res.err = fmt.Errorf("App %d was created, but: %w", app.GetID(), err)
		return res
	}
	out, err := editConfig(f.src, credentialEdits(f.opts, app.GetID(), secret, res.keyPath))
	if err == nil {
		err = writeFileAtomic(f.configPath, out, 0o600)
	}
	if err != nil {
		res.err = fmt.Errorf("App %d was created and its private key saved in %s, but the config was not written: %w", app.GetID(), res.keyPath, err)
	}
	return res
}

// credentialEdits are the configuration values that setup writes.
func credentialEdits(o setupOptions, id int64, secret, keyPath string) []configEdit {
	edits := []configEdit{
		{path: []string{"github", "web_url"}, value: o.webURL},
		{path: []string{"github", "v3_api_url"}, value: o.apiURL},
		{path: []string{"github", "v4_api_url"}, value: graphQLURL(o.apiURL)},
		{path: []string{"github", "app", "integration_id"}, value: strconv.FormatInt(id, 10), tag: "!!int"},
		{path: []string{"github", "app", "webhook_secret"}, value: secret},
		{path: []string{"github", "app", "private_key"}, value: keyPath},
	}
	if o.publicURL != "" {
		edits = append(edits, configEdit{path: []string{"server", "public_url"}, value: o.publicURL})
	}
	return edits
}

// graphQLURL derives the GraphQL endpoint from the REST one: GitHub.com's
// https://api.github.com/ → https://api.github.com/graphql, GitHub
// Enterprise Server's https://HOST/api/v3/ → https://HOST/api/graphql.
func graphQLURL(v3 string) string {
	base := strings.TrimRight(v3, "/")
	if b, ok := strings.CutSuffix(base, "/api/v3"); ok {
		return b + "/api/graphql"
	}
	return base + "/graphql"
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// writeKeyFile saves the App's private key next to the configuration file,
// readable by its owner only, and returns its absolute path.
func writeKeyFile(configPath string, app *github.AppConfig) (string, error) {
	name := unsafeFileChars.ReplaceAllString(app.GetSlug(), "-")
	if strings.Trim(name, "-") == "" {
		name = "github-app-" + strconv.FormatInt(app.GetID(), 10)
	}
	p := filepath.Join(filepath.Dir(configPath), name+".private-key.pem")
	if err := writeFileAtomic(p, []byte(app.GetPEM()), 0o600); err != nil {
		return "", fmt.Errorf("save the private key: %w", err)
	}
	return p, nil
}

// writeFileAtomic replaces the file at p with data, so that a crash leaves
// the old file or the new one, never half of one.
func writeFileAtomic(p string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

func installURL(app *github.AppConfig, webURL string) string {
	if u := app.GetHTMLURL(); u != "" {
		return strings.TrimRight(u, "/") + "/installations/new"
	}
	return webURL + "/apps/" + url.PathEscape(app.GetSlug()) + "/installations/new"
}

func (res setupResult) report(w io.Writer, o setupOptions) {
	app := res.app
	fmt.Fprintf(w, "\nCreated the GitHub App %q (id %d); the bot is @%s.\n", app.GetName(), app.GetID(), app.GetSlug())
	fmt.Fprintf(w, "Wrote:\n  %s\n    the App's private key (mode 0600)\n", res.keyPath)
	fmt.Fprintf(w, "  %s (mode 0600: it holds the webhook secret)\n", res.configPath)
	fmt.Fprintf(w, "    github.app.integration_id, github.app.webhook_secret, github.app.private_key (the key's path), github.*_url")
	if o.publicURL != "" {
		fmt.Fprintf(w, ", server.public_url")
	}
	fmt.Fprintf(w, "\nNext:\n  1. Install the App on the repositories it may work on: %s\n", installURL(app, o.webURL))
	step := 2
	if o.publicURL == "" || res.ownSecret {
		settings := o.webURL + "/settings/apps/" + url.PathEscape(app.GetSlug())
		if o.org != "" {
			settings = o.webURL + "/organizations/" + url.PathEscape(o.org) + "/settings/apps/" + url.PathEscape(app.GetSlug())
		}
		fmt.Fprintf(w, "  %d. The App has no webhook yet: at %s set the webhook URL to https://<this server>%s,\n", step, settings, WebhookPath)
		fmt.Fprintf(w, "     the secret to github.app.webhook_secret from the config, and tick Active.\n")
		step++
	}
	fmt.Fprintf(w, "  %d. Build the sandbox image: deploy/sandbox/build.sh\n", step)
	fmt.Fprintf(w, "  %d. Set OPENAI_API_KEY (llm.api_key) and start: gohands serve -config %s\n", step+1, res.configPath)
}

// configEdit sets one scalar in the configuration: the value at path, as a
// string unless tag says otherwise.
type configEdit struct {
	path  []string
	value string
	tag   string
}

// editConfig sets each edit's value in the YAML document src and returns the
// new document. It changes the values in place in the text when it can, so
// comments, blank lines and quoting elsewhere stay byte for byte; otherwise
// (a missing key, a block scalar, flow style) it rewrites the document from
// its node tree, which keeps the comments but not the blank lines.
func editConfig(src []byte, edits []configEdit) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if doc.Kind == 0 { // an empty file
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("parse config: line %d: the document is not a mapping of keys", root.Line)
	}
	// The node tree with the edits applied is the reference: the in-place
	// text must decode to exactly the same thing.
	targets := make([]*yaml.Node, len(edits))
	spliceable := true
	for i, e := range edits {
		v, existed, err := ensurePath(root, e.path)
		if err != nil {
			return nil, err
		}
		if !existed || v.Kind != yaml.ScalarNode || v.Alias != nil || v.Anchor != "" ||
			v.Style&(yaml.LiteralStyle|yaml.FoldedStyle|yaml.FlowStyle) != 0 {
			spliceable = false
		}
		targets[i] = &yaml.Node{Line: v.Line, Column: v.Column, Style: v.Style, Value: v.Value}
		setScalar(v, e)
	}
	var want any
	if err := doc.Decode(&want); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if spliceable {
		if out, err := spliceScalars(src, targets, edits); err == nil {
			var got any
			if yaml.Unmarshal(out, &got) == nil && reflect.DeepEqual(got, want) {
				return out, nil
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	return buf.Bytes(), nil
}

// ensurePath returns the value node at path under the mapping m, creating
// the mappings and the key that are missing, and whether it existed.
func ensurePath(m *yaml.Node, path []string) (*yaml.Node, bool, error) {
	for i, key := range path {
		if m.Kind != yaml.MappingNode {
			return nil, false, fmt.Errorf("line %d: %s is not a mapping", m.Line, strings.Join(path[:i], "."))
		}
		var v *yaml.Node
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == key {
				v = m.Content[j+1]
			}
		}
		last := i == len(path)-1
		if v == nil {
			v = &yaml.Node{Kind: yaml.MappingNode}
			if last {
				v = &yaml.Node{Kind: yaml.ScalarNode}
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
			if last {
				return v, false, nil
			}
		} else if last {
			return v, true, nil
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			// "github:" with nothing under it.
			*v = yaml.Node{Kind: yaml.MappingNode, Line: v.Line, Column: v.Column}
		}
		m = v
	}
	return nil, false, errors.New("empty configuration path")
}

func setScalar(v *yaml.Node, e configEdit) {
	tag, style := e.tag, yaml.Style(0)
	if tag == "" {
		tag, style = "!!str", yaml.DoubleQuotedStyle
	}
	head, line, foot := v.HeadComment, v.LineComment, v.FootComment
	*v = yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Style: style, Value: e.value,
		HeadComment: head, LineComment: line, FootComment: foot}
}

// spliceScalars replaces single-line scalars in src, given their original
// positions, with the edits' values, right to left so positions stay valid.
func spliceScalars(src []byte, targets []*yaml.Node, edits []configEdit) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ta, tb := targets[order[a]], targets[order[b]]
		if ta.Line != tb.Line {
			return ta.Line > tb.Line
		}
		return ta.Column > tb.Column
	})
	for _, i := range order {
		t := targets[i]
		if t.Line < 1 || t.Line > len(lines) {
			return nil, errors.New("scalar position out of range")
		}
		line := []rune(lines[t.Line-1])
		start := t.Column - 1
		if start < 0 || start > len(line) {
			return nil, errors.New("scalar position out of range")
		}
		n, err := scalarLen(line[start:], t.Style)
		if err != nil {
			return nil, err
		}
		repl := encodeScalar(edits[i])
		lines[t.Line-1] = string(line[:start]) + repl + string(line[start+n:])
	}
	return []byte(strings.Join(lines, "")), nil
}

// scalarLen is the length in runes of the single-line scalar at the start of s.
func scalarLen(s []rune, style yaml.Style) (int, error) {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
	case style&yaml.SingleQuotedStyle != 0:
		for i := 1; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
	default:
		end := len(s)
		for i, r := range s {
			if r == '\n' || r == '\r' || (r == '#' && i > 0 && (s[i-1] == ' ' || s[i-1] == '\t')) {
				end = i
				break
			}
		}
		for end > 0 && (s[end-1] == ' ' || s[end-1] == '\t') {
			end--
		}
		return end, nil
	}
	return 0, errors.New("quoted scalar does not end on its line")
}

func encodeScalar(e configEdit) string {
	if e.tag != "" {
		return e.value
	}
	// A JSON string is a valid YAML double-quoted scalar.
	b, _ := json.Marshal(e.value) // a string always encodes
	return string(b)
}
