package apptest

import (
	"context"
	"fmt"
)

// Diff returns `git diff base...head` of the repository owner/name: what
// head changed since it left base, as a pull request shows it.
func (s *GitServer) Diff(owner, name, base, head string) (string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	out, err := s.git(ctx, gitDir, nil, nil, "diff", "--no-color", base+"..."+head, "--")
	if err != nil {
		return "", fmt.Errorf("diff %s...%s in %s/%s: %w", base, head, owner, name, err)
	}
	return string(out), nil
}
