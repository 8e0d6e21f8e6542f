// Package apptest holds the stand-ins for the outside world that gohands'
// tests and its offline demo run against: a GitHub API emulator, a scripted
// OpenAI-compatible model server and a git server.
package apptest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

// GitHubDocsURL is the documentation_url GitHub puts in its error bodies.
const GitHubDocsURL = "https://docs.github.com/rest"

// Defaults of the emulated App, applied where GitHubOptions leaves a field zero.
const (
	DefaultGitHubAppID          int64 = 1
	DefaultGitHubSlug                 = "gohands"
	DefaultGitHubInstallationID int64 = 1
	DefaultGitHubTokenTTL             = time.Hour
)

// maxJWTLifetime is the longest App JWT GitHub accepts (exp - iat).
const maxJWTLifetime = 10*time.Minute + time.Minute

// GitHubOptions configures a GitHub emulator. The zero value is usable.
type GitHubOptions struct {
	// AppID is the App's numeric id (the JWT issuer).
	AppID int64
	// Slug is the App's slug; the bot's login is Slug+"[bot]".
	Slug string
	// Name is the App's display name; defaults to Slug.
	Name string
	// PrivateKey signs App JWTs; a 2048-bit key is generated when nil.
	PrivateKey *rsa.PrivateKey
	// WebhookSecret is the App's webhook secret; random when empty.
	WebhookSecret string
	// InstallationID is the id of the App's one installation.
	InstallationID int64
	// ActionsToken is the static GITHUB_TOKEN of Actions mode; random when empty.
	ActionsToken string
	// TokenTTL is how long installation tokens live.
	TokenTTL time.Duration
	// ResolveRef, when set, gives the commit of a branch, so pull requests
	// carry a head SHA; a branch it does not know makes PR creation fail
	// with 422, like GitHub does for a head that does not exist.
	ResolveRef func(owner, repo, branch string) (sha string, ok bool)
}

// GitHubCall is one request the emulator received.
type GitHubCall struct {
	Method string
	Path   string
	Query  string
	Status int
	// Body is the request body as sent, so tests can check what reached GitHub (e.g. that secrets were masked).
	Body string
	// Actor is the login the request was authenticated as ("" when none).
	Actor string
	Time  time.Time
}

// GitHub is an in-memory GitHub REST API for tests and the offline demo: it
// keeps repositories, issues, pull requests, comments and reactions, checks
// App JWTs and installation tokens, and records every call. Responses are
// go-github types encoded as GitHub does; html_url links point at the emulator.
type GitHub struct {
	// URL is the API base URL without a trailing slash; go-github wants URL+"/".
	URL string
	// AppID, Slug, PrivateKeyPEM and WebhookSecret describe the emulated App.
	AppID         int64
	Slug          string
	PrivateKeyPEM []byte
	WebhookSecret string
	// InstallationID is the App's installation on every repository.
	InstallationID int64
	// ActionsToken is always valid, like GITHUB_TOKEN inside a workflow run.
	ActionsToken string

	name       string
	key        *rsa.PrivateKey
	tokenTTL   time.Duration
	resolveRef func(owner, repo, branch string) (string, bool)
	srv        *httptest.Server
	routes     []ghRoute

	mu             sync.Mutex
	tokens         map[string]time.Time // installation token → expiry
	calls          []GitHubCall
	repos          map[string]*ghRepo
	users          map[string]int64
	nextID         int64
	comments       map[int64]*ghComment
	reviewComments map[int64]*ghReviewComment
	reviews        map[int64]*ghReview
	reactions      []ghReaction
	manifestCodes  map[string]bool
	failPermission int
	denied         map[string]bool // "METHOD pattern" → answer 403 (see Deny)
}

// NewGitHubServer starts a GitHub emulator on a loopback port. Call Close when done.
func NewGitHubServer(opts GitHubOptions) (*GitHub, error) {
	g := &GitHub{
		AppID:          opts.AppID,
		Slug:           opts.Slug,
		name:           opts.Name,
		WebhookSecret:  opts.WebhookSecret,
		InstallationID: opts.InstallationID,
		ActionsToken:   opts.ActionsToken,
		key:            opts.PrivateKey,
		tokenTTL:       opts.TokenTTL,
		resolveRef:     opts.ResolveRef,
		tokens:         map[string]time.Time{},
		repos:          map[string]*ghRepo{},
		users:          map[string]int64{},
		nextID:         1000,
		comments:       map[int64]*ghComment{},
		reviewComments: map[int64]*ghReviewComment{},
		reviews:        map[int64]*ghReview{},
		manifestCodes:  map[string]bool{},
	}
	if g.AppID == 0 {
		g.AppID = DefaultGitHubAppID
	}
	if g.Slug == "" {
		g.Slug = DefaultGitHubSlug
	}
	if g.name == "" {
		g.name = g.Slug
	}
	if g.InstallationID == 0 {
		g.InstallationID = DefaultGitHubInstallationID
	}
	if g.tokenTTL == 0 {
		g.tokenTTL = DefaultGitHubTokenTTL
	}
	if g.key == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("generate app key: %w", err)
		}
		g.key = k
	}
	g.PrivateKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(g.key)})
	if g.WebhookSecret == "" {
		g.WebhookSecret = randomString(32)
	}
	if g.ActionsToken == "" {
		g.ActionsToken = "ghs_actions" + randomString(30)
	}
	g.routes = g.buildRoutes()
	g.srv = httptest.NewServer(g)
	g.URL = g.srv.URL
	return g, nil
}

// sharedKey is the App key of emulators made by NewGitHub: one RSA key per
// test binary instead of one per test, which costs a tenth of a second each.
var sharedKey = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

// NewGitHub starts a GitHub emulator for a test and closes it when the test ends.
// Emulators made this way in one test binary share one App key.
func NewGitHub(tb testing.TB) *GitHub {
	tb.Helper()
	key, err := sharedKey()
	if err != nil {
		tb.Fatalf("generate app key: %v", err)
	}
	g, err := NewGitHubServer(GitHubOptions{PrivateKey: key})
	if err != nil {
		tb.Fatalf("start GitHub emulator: %v", err)
	}
	tb.Cleanup(g.Close)
	return g
}

// Close shuts the emulator down.
func (g *GitHub) Close() { g.srv.Close() }

// BotLogin is the login the App acts as: Slug+"[bot]".
func (g *GitHub) BotLogin() string { return g.Slug + "[bot]" }

// ActionsLogin is the login the Actions token acts as.
const ActionsLogin = "github-actions[bot]"

// Client returns a go-github client authenticated with token and pointed at the emulator.
func (g *GitHub) Client(token string) *github.Client {
	c := github.NewClient(g.srv.Client()).WithAuthToken(token)
	u, _ := url.Parse(g.URL + "/") // g.URL comes from httptest and always parses
	c.BaseURL = u
	c.UploadURL = u
	return c
}

// InstallationToken issues a fresh installation token, as POST
// /app/installations/{id}/access_tokens would.
func (g *GitHub) InstallationToken() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	tok, _ := g.issueToken()
	return tok
}

// ValidToken reports whether token is an unexpired installation token or the Actions token.
func (g *GitHub) ValidToken(token string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.actorForToken(token) != ""
}

// Calls returns every request received so far, in order.
func (g *GitHub) Calls() []GitHubCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]GitHubCall(nil), g.calls...)
}

// FailPermission makes the next n collaborator-permission requests fail with 502.
func (g *GitHub) FailPermission(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failPermission = n
}

// Deny makes the endpoint of method and pattern, as the emulator's routes
// write it (such as "POST", "/repos/{owner}/{repo}/pulls"), answer 403
// "Resource not accessible by integration", as GitHub does when the App
// lacks the permission the endpoint needs.
func (g *GitHub) Deny(method, pattern string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.denied == nil {
		g.denied = map[string]bool{}
	}
	g.denied[method+" "+pattern] = true
}

// AddManifestCode registers a one-time code for POST /app-manifests/{code}/conversions.
func (g *GitHub) AddManifestCode(code string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.manifestCodes[code] = true
}

func (g *GitHub) issueToken() (string, time.Time) {
	tok := "ghs_" + randomString(36)
	exp := time.Now().Add(g.tokenTTL).Truncate(time.Second)
	g.tokens[tok] = exp
	return tok, exp
}

// actorForToken returns the login a token acts as, or "" when it is not valid.
func (g *GitHub) actorForToken(token string) string {
	if token == "" {
		return ""
	}
	if token == g.ActionsToken {
		return ActionsLogin
	}
	if exp, ok := g.tokens[token]; ok && time.Now().Before(exp) {
		return g.BotLogin()
	}
	return ""
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

// --- HTTP plumbing -------------------------------------------------------

type authKind int

const (
	authToken authKind = iota // installation or Actions token
	authJWT                   // App JWT
	authNone
)

type ghRoute struct {
	method  string
	raw     string // the pattern as written, for Deny
	pattern []string
	auth    authKind
	handle  func(*ghCtx)
}

type ghCtx struct {
	g      *GitHub
	w      http.ResponseWriter
	r      *http.Request
	params map[string]string
	actor  string
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// ServeHTTP routes a request to the emulated endpoint and records it.
func (g *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	g.mu.Lock()
	defer g.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w}
	c := &ghCtx{g: g, w: sw, r: r}
	defer func() {
		g.calls = append(g.calls, GitHubCall{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Status: sw.status, Body: string(body), Actor: c.actor, Time: time.Now(),
		})
	}()
	segs := splitPath(r.URL.Path)
	for _, rt := range g.routes {
		params, ok := matchRoute(rt.pattern, segs)
		if !ok || rt.method != r.Method {
			continue
		}
		c.params = params
		if !g.authenticate(c, rt.auth) {
			return
		}
		if g.denied[rt.method+" "+rt.raw] {
			c.fail(http.StatusForbidden, "Resource not accessible by integration")
			return
		}
		rt.handle(c)
		return
	}
	// Unknown paths, and known paths with a method GitHub does not serve there, get GitHub's 404.
	c.fail(http.StatusNotFound, "Not Found")
}

func (g *GitHub) authenticate(c *ghCtx, kind authKind) bool {
	if kind == authNone {
		return true
	}
	scheme, cred, _ := strings.Cut(c.r.Header.Get("Authorization"), " ")
	scheme = strings.ToLower(scheme)
	if kind == authJWT {
		if scheme != "bearer" {
			c.fail(http.StatusUnauthorized, "A JSON web token could not be decoded")
			return false
		}
		if err := g.verifyJWT(cred, time.Now()); err != nil {
			c.fail(http.StatusUnauthorized, err.Error())
			return false
		}
		c.actor = g.Slug
		return true
	}
	if scheme != "token" && scheme != "bearer" {
		c.fail(http.StatusUnauthorized, "Requires authentication")
		return false
	}
	c.actor = g.actorForToken(cred)
	if c.actor == "" {
		c.fail(http.StatusUnauthorized, "Bad credentials")
		return false
	}
	return true
}

// verifyJWT checks an App JWT the way GitHub does: RS256 by the App's key,
// issuer = App id, not expired, not living longer than ten minutes.
func (g *GitHub) verifyJWT(tok string, now time.Time) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("A JSON web token could not be decoded")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err := decodeJWTPart(parts[0], &hdr); err != nil {
		return errors.New("A JSON web token could not be decoded")
	}
	if hdr.Alg != "RS256" {
		return fmt.Errorf("'alg' must be RS256, got %q", hdr.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return errors.New("A JSON web token could not be decoded")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return errors.New("A JSON web token could not be decoded")
	}
	var claims struct {
		Iss any     `json:"iss"`
		Exp float64 `json:"exp"`
		Iat float64 `json:"iat"`
	}
	if err := decodeJWTPart(parts[1], &claims); err != nil {
		return errors.New("A JSON web token could not be decoded")
	}
	if fmt.Sprint(claims.Iss) != strconv.FormatInt(g.AppID, 10) {
		return errors.New("'Issuer' claim ('iss') must be an Integer")
	}
	exp := time.Unix(int64(claims.Exp), 0)
	iat := time.Unix(int64(claims.Iat), 0)
	if claims.Exp == 0 || !exp.After(now) {
		return errors.New("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
	}
	if claims.Iat == 0 || iat.After(now.Add(time.Minute)) {
		return errors.New("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued")
	}
	if exp.Sub(iat) > maxJWTLifetime {
		return errors.New("'Expiration time' claim ('exp') is too far in the future")
	}
	return nil
}

func decodeJWTPart(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = u
		}
	}
	return segs
}

func matchRoute(pattern, segs []string) (map[string]string, bool) {
	if len(pattern) != len(segs) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") {
			params[strings.Trim(p, "{}")] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// json writes v with status, as GitHub does.
func (c *ghCtx) json(status int, v any) {
	c.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	c.w.WriteHeader(status)
	if v == nil {
		return
	}
	_ = json.NewEncoder(c.w).Encode(v) // a write error means the client went away
}

// fail writes GitHub's error body.
func (c *ghCtx) fail(status int, msg string) {
	c.json(status, map[string]string{
		"message":           msg,
		"documentation_url": GitHubDocsURL,
		"status":            strconv.Itoa(status),
	})
}

// invalid writes GitHub's 422 "Validation Failed" with one error.
func (c *ghCtx) invalid(resource, field, code, msg string) {
	e := map[string]string{"resource": resource, "code": code}
	if field != "" {
		e["field"] = field
	}
	if msg != "" {
		e["message"] = msg
	}
	c.json(http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]string{e},
		"documentation_url": GitHubDocsURL,
		"status":            "422",
	})
}

func (c *ghCtx) decode(v any) bool {
	b, err := io.ReadAll(c.r.Body)
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		c.fail(http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

func (c *ghCtx) intParam(name string) (int64, bool) {
	n, err := strconv.ParseInt(c.params[name], 10, 64)
	if err != nil || n <= 0 {
		c.fail(http.StatusNotFound, "Not Found")
		return 0, false
	}
	return n, true
}

// paginate returns the page of items the query asks for and sets GitHub's Link header.
func paginate[T any](c *ghCtx, items []T) []T {
	q := c.r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	last := max((len(items)+per-1)/per, 1)
	link := func(p int, rel string) string {
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		return fmt.Sprintf("<%s%s?%s>; rel=%q", c.g.URL, c.r.URL.Path, q.Encode(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(min(page-1, last), "prev"))
	}
	if len(links) > 0 {
		c.w.Header().Set("Link", strings.Join(links, ", "))
	}
	start := min((page-1)*per, len(items))
	end := min(start+per, len(items))
	return items[start:end]
}
