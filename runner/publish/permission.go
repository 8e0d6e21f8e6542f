package publish

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/google/go-github/v66/github"
)

// The repository roles GitHub reports in role_name.
var knownRoles = []string{"admin", "maintain", "write", "triage", "read", "none"}

// Permission returns user's role on owner/repo: admin, maintain, write, triage,
// read or none. Server and network errors are retried (see WithBackoff); a 404
// (no such user, or a repository the token cannot see) means "none".
func Permission(ctx context.Context, client *github.Client, owner, repo, user string, opts ...Option) (string, error) {
	o := buildOptions(opts)
	p, resp, err := withRetry(ctx, o.backoff, func() (*github.RepositoryPermissionLevel, *github.Response, error) {
		return client.Repositories.GetPermissionLevel(ctx, owner, repo, user)
	})
	if statusCode(resp) == http.StatusNotFound {
		return "none", nil
	}
	if err != nil {
		return "", fmt.Errorf("permission of %s on %s/%s: %w", user, owner, repo, err)
	}
	// role_name tells maintain from write and triage from read; the legacy
	// permission field does not. Custom roles fall back to the legacy field.
	if r := p.GetRoleName(); slices.Contains(knownRoles, r) {
		return r, nil
	}
	if p.GetPermission() == "" {
		return "none", nil
	}
	return p.GetPermission(), nil
}

// CanWrite reports whether a role from Permission may push: write, maintain or admin.
func CanWrite(perm string) bool {
	return perm == "write" || perm == "maintain" || perm == "admin"
}

// permCache asks Permission once per login within one load.
type permCache struct {
	client *github.Client
	owner  string
	repo   string
	opts   []Option
	seen   map[string]bool
}

func (c *permCache) canWrite(ctx context.Context, login string) (bool, error) {
	if w, ok := c.seen[login]; ok {
		return w, nil
	}
	p, err := Permission(ctx, c.client, c.owner, c.repo, login, c.opts...)
	if err != nil {
		return false, err
	}
	c.seen[login] = CanWrite(p)
	return c.seen[login], nil
}
