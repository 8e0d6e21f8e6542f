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

// PushPullHead commits files on top of the default branch as a fork's pull
// request would, and stores the commit only as refs/pull/<number>/head, the
// way GitHub exposes a fork's head in the base repository. It returns the
// commit's hash.
func (s *GitServer) PushPullHead(owner, name string, number int, files map[string]string, msg string) (string, error) {
	gitDir, err := s.repoDir(owner, name)
	if err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("gitserver-pull-%d", number)
	hash, err := s.PushCommit(owner, name, tmp, files, msg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.git(ctx, gitDir, nil, nil, "update-ref", fmt.Sprintf("refs/pull/%d/head", number), hash); err != nil {
		return "", fmt.Errorf("pull head %d in %s/%s: %w", number, owner, name, err)
	}
	if _, err := s.git(ctx, gitDir, nil, nil, "update-ref", "-d", "refs/heads/"+tmp); err != nil {
		return "", fmt.Errorf("pull head %d in %s/%s: %w", number, owner, name, err)
	}
	return hash, nil
}
