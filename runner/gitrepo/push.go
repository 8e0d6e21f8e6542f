package gitrepo

import (
	"context"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// pushAttempts bounds how often Push integrates a moved branch and retries.
const pushAttempts = 3

// packWindow is the delta search window for pushed packs (git's default).
const packWindow = 10

// Push pushes the branch to origin without force. If someone else pushed to
// the branch meanwhile, their commits are fetched and, when they touch no file
// the job touched, merged; otherwise Push returns a *BranchMovedError and the
// remote is left as the other person made it.
//
// Push speaks send-pack itself rather than through go-git's Push, which
// walks the whole history of every remote ref to find what to send (seconds
// and a gigabyte of allocations on a 5,000-commit repository); here only the
// job's new commits are walked, down to commits the remote is known to have.
func (w *Workspace) Push(ctx context.Context, token string) error {
	auth := &githttp.BasicAuth{Username: TokenUser, Password: token}
	var lastErr error
	for range pushAttempts {
		done, err := w.pushOnce(ctx, auth)
		if done {
			return err
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("push %s to %s: %w", w.Branch, w.CloneURL, lastErr)
}

// pushOnce tries one push. done is false when the remote branch moved (and
// was integrated) or the update was refused, so that a retry may succeed.
func (w *Workspace) pushOnce(ctx context.Context, auth transport.AuthMethod) (done bool, err error) {
	head, err := w.headCommit()
	if err != nil {
		return true, err
	}
	ep, err := transport.NewEndpoint(w.CloneURL)
	if err != nil {
		return true, fmt.Errorf("push %s: %w", w.Branch, err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return true, fmt.Errorf("push %s: %w", w.Branch, err)
	}
	sess, err := cl.NewReceivePackSession(ep, auth)
	if err != nil {
		return true, fmt.Errorf("push %s to %s: %w", w.Branch, w.CloneURL, err)
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return true, fmt.Errorf("push %s to %s: %w", w.Branch, w.CloneURL, err)
	}
	branchRef := plumbing.NewBranchReferenceName(w.Branch)
	known := map[plumbing.Hash]bool{}
	old := plumbing.ZeroHash
	refs, err := adv.AllReferences()
	if err != nil {
		return true, fmt.Errorf("push %s: %w", w.Branch, err)
	}
	iter, err := refs.IterReferences()
	if err != nil {
		return true, fmt.Errorf("push %s: %w", w.Branch, err)
	}
	_ = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			known[r.Hash()] = true
			if r.Name() == branchRef {
				old = r.Hash()
			}
		}
		return nil
	})
	if old == head.Hash {
		return true, w.pushed(head.Hash)
	}
	if !old.IsZero() {
		ff := false
		if oc, err := w.repo.CommitObject(old); err == nil {
			ff, _ = oc.IsAncestor(head)
		}
		if !ff {
			sess.Close()
			remote, err := w.fetchBranch(ctx, auth)
			if err != nil {
				return true, fmt.Errorf("push %s: fetch the moved branch from %s: %w", w.Branch, w.CloneURL, err)
			}
			if err := w.integrate(ctx, head, remote); err != nil {
				return true, err
			}
			return false, fmt.Errorf("branch %s moved", w.Branch)
		}
	}
	// What the remote has: its refs, and what this working tree fetched from it.
	rrefs, err := w.repo.References()
	if err != nil {
		return true, fmt.Errorf("push %s: %w", w.Branch, err)
	}
	_ = rrefs.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsRemote() && r.Type() == plumbing.HashReference {
			known[r.Hash()] = true
		}
		return nil
	})
	objs, err := newObjects(ctx, w.repo.Storer, head, known)
	if err != nil {
		return true, fmt.Errorf("push %s: %w", w.Branch, err)
	}

	req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
	req.Commands = []*packp.Command{{Name: branchRef, Old: old, New: head.Hash}}
	useRefDeltas := !adv.Capabilities.Supports(capability.OFSDelta)
	pr, pw := io.Pipe()
	req.Packfile = pr
	encoded := make(chan error, 1)
	go func() {
		_, err := packfile.NewEncoder(pw, w.repo.Storer, useRefDeltas).Encode(objs, packWindow)
		encoded <- err
		pw.CloseWithError(err)
	}()
	report, err := sess.ReceivePack(ctx, req)
	pr.Close()
	if encErr := <-encoded; encErr != nil && err == nil {
		err = encErr
	}
	if err != nil {
		return true, fmt.Errorf("push %s to %s: %w", w.Branch, w.CloneURL, err)
	}
	if report != nil {
		if err := report.Error(); err != nil {
			// Most likely the branch moved between the advertisement and
			// the update; the next attempt finds out.
			return false, err
		}
	}
	return true, w.pushed(head.Hash)
}

// pushed records that origin has the branch at h.
func (w *Workspace) pushed(h plumbing.Hash) error {
	ref := plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", w.Branch), h)
	if err := w.repo.Storer.SetReference(ref); err != nil {
		return fmt.Errorf("push %s: %w", w.Branch, err)
	}
	return w.setUpstream()
}

// newObjects lists the objects of the commits reachable from head but not
// through a known commit: each such commit, and its tree's objects that its
// first parent's tree lacks. Objects the remote has may be included (a
// merge's second side); none it lacks are left out, given that the remote
// has every object of the known commits.
func newObjects(ctx context.Context, s storer.EncodedObjectStorer, head *object.Commit, known map[plumbing.Hash]bool) ([]plumbing.Hash, error) {
	out := map[plumbing.Hash]bool{}
	seen := map[plumbing.Hash]bool{}
	stack := []*object.Commit{head}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[c.Hash] || known[c.Hash] {
			continue
		}
		seen[c.Hash] = true
		out[c.Hash] = true
		tree, err := c.Tree()
		if err != nil {
			return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
		}
		var parentTree *object.Tree
		for i, ph := range c.ParentHashes {
			p, err := object.GetCommit(s, ph)
			if err != nil {
				return nil, fmt.Errorf("parent %s of %s: %w", ph, c.Hash, err)
			}
			if i == 0 {
				if parentTree, err = p.Tree(); err != nil {
					return nil, fmt.Errorf("tree of %s: %w", ph, err)
				}
			}
			stack = append(stack, p)
		}
		if err := addTreeDiff(s, parentTree, tree, out); err != nil {
			return nil, err
		}
	}
	hs := make([]plumbing.Hash, 0, len(out))
	for h := range out {
		hs = append(hs, h)
	}
	return hs, nil
}

// addTreeDiff adds to out the objects of tree that old (nil: none) lacks,
// comparing entry by entry and descending only into differing directories.
func addTreeDiff(s storer.EncodedObjectStorer, old, tree *object.Tree, out map[plumbing.Hash]bool) error {
	if old != nil && old.Hash == tree.Hash {
		return nil
	}
	out[tree.Hash] = true
	var oldEntries map[string]object.TreeEntry
	if old != nil {
		oldEntries = make(map[string]object.TreeEntry, len(old.Entries))
		for _, e := range old.Entries {
			oldEntries[e.Name] = e
		}
	}
	for _, e := range tree.Entries {
		oe, had := oldEntries[e.Name]
		if had && oe.Hash == e.Hash {
			continue
		}
		switch e.Mode {
		case filemode.Submodule:
			// A commit of another repository: nothing to send.
		case filemode.Dir:
			sub, err := object.GetTree(s, e.Hash)
			if err != nil {
				return fmt.Errorf("tree %s: %w", e.Hash, err)
			}
			var oldSub *object.Tree
			if had && oe.Mode == filemode.Dir {
				if oldSub, err = object.GetTree(s, oe.Hash); err != nil {
					return fmt.Errorf("tree %s: %w", oe.Hash, err)
				}
			}
			if err := addTreeDiff(s, oldSub, sub, out); err != nil {
				return err
			}
		default:
			out[e.Hash] = true
		}
	}
	return nil
}
