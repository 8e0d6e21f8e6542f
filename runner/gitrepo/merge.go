package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// ErrBranchMoved is matched (errors.Is) by the error Push returns when someone
// else pushed to the job's branch and their commits could not be merged.
var ErrBranchMoved = errors.New("branch moved")

// BranchMovedError says that the remote branch has commits the job does not
// have and which touch files the job changed too. Nothing was pushed.
type BranchMovedError struct {
	Branch string
	// Foreign are the other commits on the remote branch, newest first.
	Foreign []CommitInfo
	// Conflicts are paths both sides changed.
	Conflicts []string
}

// Error names the branch, the other commits and the clashing paths.
func (e *BranchMovedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "branch %s moved: %d commit(s) pushed by someone else", e.Branch, len(e.Foreign))
	for i, c := range e.Foreign {
		if i == 5 {
			fmt.Fprintf(&b, ", …")
			break
		}
		fmt.Fprintf(&b, "%s %.7s %q by %s", map[bool]string{true: ":", false: ","}[i == 0], c.Hash, c.Subject, c.Author.Name)
	}
	if len(e.Conflicts) > 0 {
		fmt.Fprintf(&b, "; both changed %s", strings.Join(e.Conflicts, ", "))
	}
	return b.String()
}

// Is makes errors.Is(err, ErrBranchMoved) true.
func (e *BranchMovedError) Is(target error) bool { return target == ErrBranchMoved }

// defaultMergeAuthor signs merge commits when the job made no commit itself.
var defaultMergeAuthor = Signature{Name: "gohands", Email: "gohands@users.noreply.github.com"}

// integrate merges the remote branch head theirs into the local head ours
// when the two sides changed disjoint sets of files: a tree-level three-way
// merge, since go-git has no merge. Otherwise it returns a *BranchMovedError.
func (w *Workspace) integrate(ctx context.Context, ours *object.Commit, theirs plumbing.Hash) error {
	tc, err := w.repo.CommitObject(theirs)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	foreign, err := w.commitsSince(ctx, theirs, ours.Hash)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	moved := &BranchMovedError{Branch: w.Branch, Foreign: foreign}
	wt, err := w.repo.Worktree()
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}

	// The job has nothing of its own: just move to their head.
	if ff, err := ours.IsAncestor(tc); err == nil && ff {
		if err := wt.Reset(&git.ResetOptions{Commit: theirs, Mode: git.HardReset}); err != nil {
			return fmt.Errorf("integrate %s: %w", w.Branch, err)
		}
		return nil
	}

	bases, err := ours.MergeBase(tc)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	if len(bases) != 1 {
		return moved // unrelated histories or criss-cross: a person should look
	}
	base := bases[0]
	ourChanges, err := changedEntries(ctx, base, ours)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	theirChanges, err := changedEntries(ctx, base, tc)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	if moved.Conflicts = overlapping(ourChanges, theirChanges); len(moved.Conflicts) > 0 {
		return moved
	}

	files, err := flatTree(ours)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	for p, e := range theirChanges {
		if e == nil {
			delete(files, p)
		} else {
			files[p] = *e
		}
	}
	tree, err := writeTree(w.repo.Storer, files)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	author := w.author
	if author.Name == "" {
		author = defaultMergeAuthor
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: time.Now()}
	merge := &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      fmt.Sprintf("Merge remote-tracking branch 'origin/%s' into %s\n", w.Branch, w.Branch),
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{ours.Hash, theirs},
	}
	obj := w.repo.Storer.NewEncodedObject()
	if err := merge.Encode(obj); err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	mh, err := w.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", w.Branch, err)
	}
	// Only their paths change in the working tree; the job's files, committed
	// or not, are left alone.
	paths := make([]string, 0, len(theirChanges))
	for p := range theirChanges {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if err := wt.Reset(&git.ResetOptions{Commit: mh, Mode: git.HardReset, Files: paths}); err != nil {
		return fmt.Errorf("integrate %s: update working tree: %w", w.Branch, err)
	}
	return nil
}

// treeEntry is a file in a flattened tree.
type treeEntry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// changedEntries maps every path that differs between from and to to its
// entry in to (nil when deleted).
func changedEntries(ctx context.Context, from, to *object.Commit) (map[string]*treeEntry, error) {
	ft, err := from.Tree()
	if err != nil {
		return nil, err
	}
	tt, err := to.Tree()
	if err != nil {
		return nil, err
	}
	changes, err := object.DiffTreeWithOptions(ctx, ft, tt, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*treeEntry, len(changes))
	for _, ch := range changes {
		if ch.From.Name != "" && ch.From.Name != ch.To.Name {
			out[ch.From.Name] = nil
		}
		if ch.To.Name != "" {
			out[ch.To.Name] = &treeEntry{mode: ch.To.TreeEntry.Mode, hash: ch.To.TreeEntry.Hash}
		}
	}
	return out, nil
}

// overlapping lists the paths changed on both sides, counting a file on one
// side and a directory holding changes on the other as a clash.
func overlapping(a, b map[string]*treeEntry) []string {
	dirs := func(m map[string]*treeEntry) map[string]bool {
		d := make(map[string]bool)
		for p := range m {
			for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
				d[dir] = true
			}
		}
		return d
	}
	aDirs, bDirs := dirs(a), dirs(b)
	var out []string
	for p := range a {
		if _, ok := b[p]; ok || bDirs[p] {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok && aDirs[p] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// flatTree maps every non-directory path of c's tree (files, links,
// submodules) to its entry.
func flatTree(c *object.Commit) (map[string]treeEntry, error) {
	t, err := c.Tree()
	if err != nil {
		return nil, err
	}
	walker := object.NewTreeWalker(t, true, nil)
	defer walker.Close()
	out := make(map[string]treeEntry)
	for {
		name, e, err := walker.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Mode == filemode.Dir {
			continue
		}
		out[name] = treeEntry{mode: e.Mode, hash: e.Hash}
	}
}

// writeTree stores the nested trees for a flat path → entry map and returns
// the root tree's hash.
func writeTree(s storer.EncodedObjectStorer, files map[string]treeEntry) (plumbing.Hash, error) {
	type dir struct {
		files map[string]treeEntry
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]treeEntry{}, dirs: map[string]*dir{}} }
	root := newDir()
	for p, e := range files {
		parts := strings.Split(p, "/")
		d := root
		for _, part := range parts[:len(parts)-1] {
			sub, ok := d.dirs[part]
			if !ok {
				sub = newDir()
				d.dirs[part] = sub
			}
			d = sub
		}
		d.files[parts[len(parts)-1]] = e
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		t := &object.Tree{}
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		for name, e := range d.files {
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
		}
		// Git orders entries by name, comparing a directory as if it ended in "/".
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
		obj := s.NewEncodedObject()
		if err := t.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		return s.SetEncodedObject(obj)
	}
	return write(root)
}
