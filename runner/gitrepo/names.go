package gitrepo

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

var (
	// GitHub owners are alphanumerics and hyphens; repository names add _ and .
	// A leading dot is refused so that no name becomes "." or ".." or a hidden file.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$`)
	hostRE = regexp.MustCompile(`^[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$`)
)

// repoID is a repository as named by its clone URL, validated so that it can
// be used to build paths in the cache.
type repoID struct {
	host, owner, name string
}

// parseCloneURL checks that cloneURL is http(s)://host/owner/name[.git] without
// credentials and returns its parts.
func parseCloneURL(cloneURL string) (repoID, error) {
	u, err := url.Parse(cloneURL)
	if err != nil {
		return repoID{}, fmt.Errorf("clone URL: %w", err)
	}
	// The message never quotes a URL that carries credentials.
	if u.User != nil {
		return repoID{}, fmt.Errorf("clone URL for %s%s must not carry credentials; pass the token separately", u.Host, u.Path)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return repoID{}, fmt.Errorf("clone URL %q: scheme must be https or http", cloneURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return repoID{}, fmt.Errorf("clone URL %q: unexpected query or fragment", cloneURL)
	}
	if !hostRE.MatchString(u.Host) {
		return repoID{}, fmt.Errorf("clone URL %q: invalid host", cloneURL)
	}
	parts := strings.Split(strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git"), "/")
	if len(parts) != 2 || !nameRE.MatchString(parts[0]) || !nameRE.MatchString(parts[1]) {
		return repoID{}, fmt.Errorf("clone URL %q: path must be /owner/name[.git]", cloneURL)
	}
	return repoID{host: strings.ToLower(u.Host), owner: parts[0], name: parts[1]}, nil
}

// mirrorPath is where the bare mirror of id lives under the cache directory.
func (id repoID) mirrorPath(root string) string {
	return filepath.Join(root, strings.ReplaceAll(id.host, ":", "_"), strings.ToLower(id.owner), strings.ToLower(id.name)+".git")
}

func (id repoID) String() string { return id.owner + "/" + id.name }

// checkBranch refuses names git would refuse, so that no branch name can
// reach outside refs/heads.
func checkBranch(what, name string) error {
	if name == "" {
		return fmt.Errorf("%s: empty branch name", what)
	}
	ref := plumbing.NewBranchReferenceName(name)
	if err := ref.Validate(); err != nil || strings.Contains(name, "..") || strings.HasPrefix(name, "-") {
		return fmt.Errorf("%s: invalid branch name %q", what, name)
	}
	return nil
}
