package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// maxListedCommits bounds the commits listed for a resumed branch or a
// moved branch; more than that is summarized by the count.
const maxListedCommits = 100

// Signature is a commit author or co-author.
type Signature struct {
	Name  string
	Email string
}

// String formats the signature as git does: "Name <email>".
func (s Signature) String() string { return s.Name + " <" + s.Email + ">" }

// CommitInfo is one commit as shown to people: in a tracking comment, a pull
// request body or an error.
type CommitInfo struct {
	Hash    string
	Subject string
	Author  Signature
}

// FileChange is one file changed between two commits, for diff stats.
type FileChange struct {
	Path string
	// Action is "added", "modified" or "deleted".
	Action  string
	Added   int // lines added; 0 for binary files
	Deleted int // lines deleted; 0 for binary files
	Binary  bool
}

// Workspace is one job's working tree, checked out on the job's branch.
// Its methods are not safe for concurrent use.
type Workspace struct {
	// Dir is the working tree's directory.
	Dir string
	// CloneURL is the remote the branch is pushed to (without credentials).
	CloneURL string
	// Branch is the job's branch, checked out in Dir.
	Branch string
	// BaseBranch is the branch pull requests target.
	BaseBranch string
	// Resumed is true when Branch already existed on the remote and the
	// working tree continues from its head.
	Resumed bool
	// BranchCommits are the commits of a resumed Branch that are not on
	// BaseBranch, newest first (at most 100).
	BranchCommits []CommitInfo
	// BranchChanges is the diff stat of a resumed Branch against BaseBranch.
	BranchChanges []FileChange

	repo *git.Repository
	base plumbing.Hash // BaseBranch's head at Prepare time
	// author is the signature of the last Commit, used for merge commits.
	author Signature
}

// newWorkspace initializes the repository at dir (whose objects are already
// in place) and checks out the branch.
func newWorkspace(ctx context.Context, dir string, opts PrepareOptions, base, branchHead, startAt plumbing.Hash) (*Workspace, error) {
	branchRef := plumbing.NewBranchReferenceName(opts.Branch)
	// The checkout reads every blob: keeping the pack files open for it
	// avoids reopening them (and a buffer each time) per object. The
	// workspace then uses a storage that holds no descriptors.
	st := filesystem.NewStorageWithOptions(osfs.New(filepath.Join(dir, ".git")), cache.NewObjectLRU(objectCacheSize), filesystem.Options{KeepDescriptors: true})
	defer st.Close()
	repo, err := git.InitWithOptions(st, osfs.New(dir), git.InitOptions{DefaultBranch: branchRef})
	if err != nil {
		return nil, fmt.Errorf("init working tree %s: %w", dir, err)
	}
	ws := &Workspace{Dir: dir, CloneURL: opts.CloneURL, Branch: opts.Branch, BaseBranch: opts.BaseBranch, repo: repo, base: base}
	if _, err := repo.CreateRemote(&config.RemoteConfig{
		Name:  "origin",
		URLs:  []string{opts.CloneURL},
		Fetch: []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*"},
	}); err != nil {
		return nil, fmt.Errorf("working tree %s: %w", dir, err)
	}
	refs := []*plumbing.Reference{plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", opts.BaseBranch), base)}
	start := base
	if !startAt.IsZero() {
		start = startAt
	}
	if !branchHead.IsZero() {
		start = branchHead
		ws.Resumed = true
		refs = append(refs, plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", opts.Branch), branchHead))
	}
	refs = append(refs, plumbing.NewHashReference(branchRef, start))
	for _, ref := range refs {
		if err := repo.Storer.SetReference(ref); err != nil {
			return nil, fmt.Errorf("working tree %s: %w", dir, err)
		}
	}
	if ws.Resumed {
		if err := ws.setUpstream(); err != nil {
			return nil, err
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("working tree %s: %w", dir, err)
	}
	if err := wt.Reset(&git.ResetOptions{Commit: start, Mode: git.HardReset}); err != nil {
		return nil, fmt.Errorf("check out %s at %s: %w", opts.Branch, start, err)
	}
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("working tree %s: %w", dir, err)
	}
	if ws.repo, err = openWorktree(dir); err != nil {
		return nil, err
	}
	if ws.Resumed {
		if ws.BranchCommits, err = ws.commitsSince(ctx, start, base); err != nil {
			return nil, err
		}
		if ws.BranchChanges, err = ws.Changes(ctx); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// openWorktree opens the repository of the working tree at dir.
func openWorktree(dir string) (*git.Repository, error) {
	st := filesystem.NewStorage(osfs.New(filepath.Join(dir, ".git")), cache.NewObjectLRU(objectCacheSize))
	repo, err := git.Open(st, osfs.New(dir))
	if err != nil {
		return nil, fmt.Errorf("open working tree %s: %w", dir, err)
	}
	return repo, nil
}

// setUpstream records origin/Branch as the branch's upstream, so that git
// status and git log @{u} work in the working tree.
func (w *Workspace) setUpstream() error {
	cfg, err := w.repo.Config()
	if err != nil {
		return fmt.Errorf("working tree %s: %w", w.Dir, err)
	}
	cfg.Branches[w.Branch] = &config.Branch{Name: w.Branch, Remote: "origin", Merge: plumbing.NewBranchReferenceName(w.Branch)}
	if err := w.repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("working tree %s: %w", w.Dir, err)
	}
	return nil
}

// HeadCommit is the hash of the branch's head in the working tree.
func (w *Workspace) HeadCommit() string {
	ref, err := w.repo.Reference(plumbing.NewBranchReferenceName(w.Branch), false)
	if err != nil {
		return ""
	}
	return ref.Hash().String()
}

// BaseCommit is the hash of BaseBranch's head when the workspace was prepared.
func (w *Workspace) BaseCommit() string { return w.base.String() }

// Changes is the diff stat of the branch's head against where it left the
// base branch (committed changes only), for the pull request body.
func (w *Workspace) Changes(ctx context.Context) ([]FileChange, error) {
	head, err := w.headCommit()
	if err != nil {
		return nil, err
	}
	base, err := w.repo.CommitObject(w.base)
	if err != nil {
		return nil, fmt.Errorf("changes of %s: base %s: %w", w.Branch, w.base, err)
	}
	from := base
	if bases, err := head.MergeBase(base); err == nil && len(bases) > 0 {
		from = bases[0]
	}
	return diffStat(ctx, from, head)
}

func (w *Workspace) headCommit() (*object.Commit, error) {
	ref, err := w.repo.Reference(plumbing.NewBranchReferenceName(w.Branch), false)
	if err != nil {
		return nil, fmt.Errorf("branch %s: %w", w.Branch, err)
	}
	c, err := w.repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("branch %s head %s: %w", w.Branch, ref.Hash(), err)
	}
	return c, nil
}

// commitsSince lists the commits reachable from head and not from other,
// newest first, at most maxListedCommits. Commits that other reached through a
// merge after the fork point may be listed too; the list is for people.
func (w *Workspace) commitsSince(ctx context.Context, head, other plumbing.Hash) ([]CommitInfo, error) {
	hc, err := w.repo.CommitObject(head)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", head, err)
	}
	oc, err := w.repo.CommitObject(other)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", other, err)
	}
	bases, err := hc.MergeBase(oc)
	if err != nil {
		return nil, fmt.Errorf("merge base of %s and %s: %w", head, other, err)
	}
	ignore := make([]plumbing.Hash, 0, len(bases))
	for _, b := range bases {
		ignore = append(ignore, b.Hash)
	}
	iter := object.NewCommitPreorderIter(hc, nil, ignore)
	defer iter.Close()
	var out []CommitInfo
	for len(out) < maxListedCommits {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := iter.Next()
		if err != nil {
			break // io.EOF: the walk is done
		}
		out = append(out, CommitInfo{Hash: c.Hash.String(), Subject: subject(c.Message), Author: Signature{c.Author.Name, c.Author.Email}})
	}
	return out, nil
}

func subject(msg string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	return strings.TrimSpace(s)
}

// diffStat lists the files that differ between two commits with line counts.
func diffStat(ctx context.Context, from, to *object.Commit) ([]FileChange, error) {
	ft, err := from.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", from.Hash, err)
	}
	tt, err := to.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", to.Hash, err)
	}
	changes, err := object.DiffTreeWithOptions(ctx, ft, tt, nil)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", from.Hash, to.Hash, err)
	}
	out := make([]FileChange, 0, len(changes))
	for _, ch := range changes {
		fc := FileChange{Path: ch.To.Name}
		action, err := ch.Action()
		if err != nil {
			return nil, fmt.Errorf("diff %s..%s: %w", from.Hash, to.Hash, err)
		}
		switch action.String() {
		case "Insert":
			fc.Action = "added"
		case "Delete":
			fc.Action, fc.Path = "deleted", ch.From.Name
		default:
			fc.Action = "modified"
		}
		patch, err := ch.PatchContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", fc.Path, err)
		}
		for _, fp := range patch.FilePatches() {
			if fp.IsBinary() {
				fc.Binary = true
			}
		}
		for _, st := range patch.Stats() {
			fc.Added += st.Addition
			fc.Deleted += st.Deletion
		}
		out = append(out, fc)
	}
	return out, nil
}

// CommitOptions is what a commit says and who made it.
type CommitOptions struct {
	Message string
	// Author is the commit's author and committer (the bot).
	Author Signature
	// CoAuthors are credited with Co-authored-by trailers (the requester).
	CoAuthors []Signature
}

// Commit stages every change in the working tree (additions, modifications,
// deletions, modes and symbolic links; ignored files stay out) and commits
// them on the branch. It returns changed=false, and commits nothing, when
// there is nothing to commit.
func (w *Workspace) Commit(ctx context.Context, opts CommitOptions) (hash string, changed bool, err error) {
	msg := strings.TrimSpace(opts.Message)
	if msg == "" {
		return "", false, errors.New("commit: empty message")
	}
	if opts.Author.Name == "" || opts.Author.Email == "" {
		return "", false, errors.New("commit: author needs a name and an email")
	}
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	msg = withCoAuthors(msg, opts.Author, opts.CoAuthors)
	wt, err := w.repo.Worktree()
	if err != nil {
		return "", false, fmt.Errorf("commit in %s: %w", w.Dir, err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", false, fmt.Errorf("stage changes in %s: %w", w.Dir, err)
	}
	now := time.Now()
	sig := &object.Signature{Name: opts.Author.Name, Email: opts.Author.Email, When: now}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if errors.Is(err, git.ErrEmptyCommit) {
		return w.HeadCommit(), false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("commit in %s: %w", w.Dir, err)
	}
	w.author = opts.Author
	return h.String(), true, nil
}

// withCoAuthors appends one Co-authored-by trailer per distinct co-author
// other than the author.
func withCoAuthors(msg string, author Signature, co []Signature) string {
	seen := map[string]bool{strings.ToLower(author.Email): true}
	var trailers []string
	for _, c := range co {
		key := strings.ToLower(c.Email)
		if c.Name == "" || c.Email == "" || seen[key] {
			continue
		}
		seen[key] = true
		trailers = append(trailers, "Co-authored-by: "+c.String())
	}
	if len(trailers) == 0 {
		return msg + "\n"
	}
	return msg + "\n\n" + strings.Join(trailers, "\n") + "\n"
}

// fetchBranch updates origin/Branch and returns its hash (zero if the remote
// has no such branch).
func (w *Workspace) fetchBranch(ctx context.Context, auth transport.AuthMethod) (plumbing.Hash, error) {
	remoteRef := plumbing.NewRemoteReferenceName("origin", w.Branch)
	spec := config.RefSpec("+" + plumbing.NewBranchReferenceName(w.Branch) + ":" + remoteRef)
	err := w.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: auth, Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if errors.Is(err, git.NoMatchingRefSpecError{}) {
			return plumbing.ZeroHash, nil
		}
		return plumbing.ZeroHash, err
	}
	ref, err := w.repo.Reference(remoteRef, false)
	if err != nil {
		return plumbing.ZeroHash, nil
	}
	return ref.Hash(), nil
}
