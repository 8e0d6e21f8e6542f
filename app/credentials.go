package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"
)

// apiTimeout bounds one GitHub API request.
const apiTimeout = 30 * time.Second

// appCredentials makes GitHub clients and git tokens for the App's
// installations. They stay on the host: nothing here is passed to a
// sandbox or a prompt.
type appCredentials struct {
	apiURL string // v3, without trailing slash
	appID  int64
	key    []byte
	base   http.RoundTripper

	mu     sync.Mutex
	byInst map[int64]*installation
}

// installation is one installation's token source and the client that
// uses it, shared by every webhook and job of that installation: go-github
// clients are safe for concurrent use, and a shared one also shares what
// it learns of the rate limits.
type installation struct {
	transport *ghinstallation.Transport
	client    *github.Client
}

func newAppCredentials(apiURL string, appID int64, key []byte, base http.RoundTripper) *appCredentials {
	return &appCredentials{
		apiURL: strings.TrimSuffix(apiURL, "/"),
		appID:  appID,
		key:    key,
		base:   base,
		byInst: map[int64]*installation{},
	}
}

func (c *appCredentials) installation(installationID int64) (*installation, error) {
	if installationID <= 0 {
		return nil, fmt.Errorf("the event names no App installation (id %d)", installationID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.byInst[installationID]; ok {
		return in, nil
	}
	t, err := ghinstallation.New(c.base, c.appID, installationID, c.key)
	if err != nil {
		return nil, fmt.Errorf("installation %d: %w", installationID, err)
	}
	t.BaseURL = c.apiURL
	gh, err := newClient(&http.Client{Transport: t, Timeout: apiTimeout}, c.apiURL)
	if err != nil {
		return nil, err
	}
	in := &installation{transport: t, client: gh}
	c.byInst[installationID] = in
	return in, nil
}

// Client returns a go-github client acting as the installation.
func (c *appCredentials) Client(_ context.Context, installationID int64) (*github.Client, error) {
	in, err := c.installation(installationID)
	if err != nil {
		return nil, err
	}
	return in.client, nil
}

// Token returns the installation's current access token, for git over HTTPS.
func (c *appCredentials) Token(ctx context.Context, installationID int64) (string, error) {
	in, err := c.installation(installationID)
	if err != nil {
		return "", err
	}
	tok, err := in.transport.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("installation %d token: %w", installationID, err)
	}
	return tok, nil
}

// appClient returns a client that authenticates as the App itself (JWT),
// for GET /app.
func (c *appCredentials) appClient() (*github.Client, error) {
	t, err := ghinstallation.NewAppsTransport(c.base, c.appID, c.key)
	if err != nil {
		return nil, fmt.Errorf("github.app.private_key: %w", err)
	}
	t.BaseURL = c.apiURL
	return newClient(&http.Client{Transport: t, Timeout: apiTimeout}, c.apiURL)
}

// tokenCredentials is the GitHub Actions mode: one token for everything.
type tokenCredentials struct {
	apiURL string
	token  string
	base   http.RoundTripper
}

// Client returns a client authenticated with the workflow's token.
func (c *tokenCredentials) Client(context.Context, int64) (*github.Client, error) {
	hc := &http.Client{Transport: c.base, Timeout: apiTimeout}
	gh, err := newClient(hc, c.apiURL)
	if err != nil {
		return nil, err
	}
	return gh.WithAuthToken(c.token), nil
}

// Token returns the workflow's token.
func (c *tokenCredentials) Token(context.Context, int64) (string, error) { return c.token, nil }

func newClient(hc *http.Client, apiURL string) (*github.Client, error) {
	gh := github.NewClient(hc)
	if apiURL == "" || apiURL == strings.TrimSuffix(DefaultV3APIURL, "/") {
		return gh, nil
	}
	// Not WithEnterpriseURLs: it would add /api/v3/ to a URL that lacks it,
	// and the configured URL is taken as it is.
	u, err := url.Parse(apiURL + "/")
	if err != nil {
		return nil, fmt.Errorf("github.v3_api_url: %w", err)
	}
	gh.BaseURL, gh.UploadURL = u, u
	return gh, nil
}
