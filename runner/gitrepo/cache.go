// Package gitrepo is gohands' git: a cache of bare mirrors fetched
// incrementally with go-git, job working trees made from them, commits with
// co-author trailers, and pushes that never force. It is the only package
// that imports go-git.
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// TokenUser is the basic-auth user name sent with installation tokens.
const TokenUser = "x-access-token"

// objectCacheSize bounds go-git's decoded-object cache per open repository;
// go-git's default (96 MiB) would dwarf the rest of a job.
const objectCacheSize = 2 * cache.MiByte

// mirrorRefSpec keeps the mirror's branches identical to the remote's.
const mirrorRefSpec = config.RefSpec("+refs/heads/*:refs/heads/*")

// DefaultMaxPacks is the default of Cache.MaxPacks.
const DefaultMaxPacks = 50

// Cache holds one bare mirror per repository under a directory and makes job
// working trees from them. It is safe for concurrent use; a Cache per
// directory per process is expected, and processes sharing a directory are
// serialized by a file lock per repository.
type Cache struct {
	// MaxPacks is how many pack files a mirror may collect (one per
	// incremental fetch) before it is repacked into one, since every pack
	// costs each later job an index load. Zero means DefaultMaxPacks.
	MaxPacks int

	dir string

	mu    sync.Mutex
	locks map[string]chan struct{}
}

// NewCache returns a cache rooted at dir (created if missing), e.g.
// <store.path>/repos.
func NewCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("git cache: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("git cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("git cache: %w", err)
	}
	return &Cache{dir: abs, locks: make(map[string]chan struct{})}, nil
}

// Dir is the cache's root directory.
func (c *Cache) Dir() string { return c.dir }

// PrepareOptions says which repository and branch a job works on, and where.
type PrepareOptions struct {
	// CloneURL is the repository's https URL, without credentials.
	CloneURL string
	// Token authenticates fetches (basic auth as x-access-token); it is
	// never written to disk.
	Token string
	// Branch is the job's branch, e.g. gohands/issue-5. If the remote has it,
	// the job resumes from it; otherwise it starts from BaseBranch.
	Branch string
	// BaseBranch is the branch a new Branch starts from and pull requests
	// target, usually the default branch.
	BaseBranch string
	// Dir is where the working tree is made; it must not exist or be empty.
	Dir string
	// StartRef, when set, is where a new Branch starts instead of
	// BaseBranch's head: a ref the remote serves outside refs/heads, such as
	// refs/pull/7/head (a fork's pull request, which cannot be pushed to).
	StartRef string
}

// Prepare brings the repository's mirror up to date (an incremental fetch
// after the first time) and makes a working tree at opts.Dir checked out on
// opts.Branch, with origin pointing at the credential-free clone URL.
func (c *Cache) Prepare(ctx context.Context, opts PrepareOptions) (*Workspace, error) {
	id, err := parseCloneURL(opts.CloneURL)
	if err != nil {
		return nil, err
	}
	if err := checkBranch("branch", opts.Branch); err != nil {
		return nil, err
	}
	if err := checkBranch("base branch", opts.BaseBranch); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("prepare: empty working tree directory")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("prepare: working tree %s: %w", opts.Dir, err)
	}
	if err := emptyDir(dir); err != nil {
		return nil, fmt.Errorf("prepare: working tree: %w", err)
	}
	auth := &githttp.BasicAuth{Username: TokenUser, Password: opts.Token}

	ws, err := c.prepare(ctx, id, auth, opts, dir)
	if err != nil {
		// Leave nothing half-made behind: the directory was empty.
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			for _, e := range entries {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
		return nil, err
	}
	return ws, nil
}

func (c *Cache) prepare(ctx context.Context, id repoID, auth transport.AuthMethod, opts PrepareOptions, dir string) (*Workspace, error) {
	mirror := id.mirrorPath(c.dir)
	var baseHash, branchHash, startHash plumbing.Hash
	err := c.withRepoLock(ctx, mirror, func() error {
		_, statErr := os.Stat(mirror)
		repo, err := syncMirror(ctx, mirror, opts.CloneURL, auth)
		if err != nil {
			if errors.Is(statErr, fs.ErrNotExist) {
				os.RemoveAll(mirror) // a first fetch failed: keep no empty mirror
			}
			return err
		}
		if err := c.compact(ctx, repo, mirror); err != nil {
			return err
		}
		ref, err := repo.Reference(plumbing.NewBranchReferenceName(opts.BaseBranch), false)
		if err != nil {
			return fmt.Errorf("prepare %s: base branch %q not found on %s", id, opts.BaseBranch, opts.CloneURL)
		}
		baseHash = ref.Hash()
		if ref, err := repo.Reference(plumbing.NewBranchReferenceName(opts.Branch), false); err == nil {
			branchHash = ref.Hash()
		}
		if branchHash.IsZero() && opts.StartRef != "" {
			if startHash, err = fetchStart(ctx, repo, opts.CloneURL, opts.StartRef, auth); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755); err != nil {
			return fmt.Errorf("prepare %s: %w", id, err)
		}
		// Pack files are immutable, so the working tree shares them with the
		// mirror through hard links: no copy, yet the working tree stays a
		// self-contained repository that can be copied into a sandbox.
		if err := linkTree(filepath.Join(mirror, "objects"), filepath.Join(dir, ".git", "objects")); err != nil {
			return fmt.Errorf("prepare %s: objects: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return newWorkspace(ctx, dir, opts, baseHash, branchHash, startHash)
}

// startRefName is where the mirror keeps a fetched StartRef.
const startRefName = "refs/gohands/start"

// fetchStart fetches ref (outside refs/heads) into the mirror and returns
// its commit.
func fetchStart(ctx context.Context, repo *git.Repository, cloneURL, ref string, auth transport.AuthMethod) (plumbing.Hash, error) {
	if err := plumbing.ReferenceName(ref).Validate(); err != nil || !strings.HasPrefix(ref, "refs/") {
		return plumbing.ZeroHash, fmt.Errorf("prepare: start ref %q is not a full ref name", ref)
	}
	spec := config.RefSpec("+" + ref + ":" + startRefName)
	err := repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: auth, Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s from %s: %w", ref, cloneURL, err)
	}
	r, err := repo.Reference(startRefName, true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s from %s: %w", ref, cloneURL, err)
	}
	return r.Hash(), nil
}

// compact repacks the mirror when it has more than MaxPacks packs.
func (c *Cache) compact(ctx context.Context, repo *git.Repository, mirror string) error {
	limit := c.MaxPacks
	if limit <= 0 {
		limit = DefaultMaxPacks
	}
	pos, ok := repo.Storer.(storer.PackedObjectStorer)
	if !ok {
		return nil
	}
	packs, err := pos.ObjectPacks()
	if err != nil {
		return fmt.Errorf("mirror %s: %w", mirror, err)
	}
	if len(packs) <= limit {
		return nil
	}
	start := time.Now()
	if err := repo.RepackObjects(&git.RepackConfig{}); err != nil {
		return fmt.Errorf("repack mirror %s: %w", mirror, err)
	}
	slog.InfoContext(ctx, "repacked git mirror", "mirror", mirror, "packs", len(packs), "duration", time.Since(start))
	return nil
}

// withRepoLock runs f holding the in-process and the file lock of mirror.
func (c *Cache) withRepoLock(ctx context.Context, mirror string, f func() error) error {
	c.mu.Lock()
	ch, ok := c.locks[mirror]
	if !ok {
		ch = make(chan struct{}, 1)
		c.locks[mirror] = ch
	}
	c.mu.Unlock()
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for repository lock: %w", ctx.Err())
	}
	defer func() { <-ch }()
	if err := os.MkdirAll(filepath.Dir(mirror), 0o700); err != nil {
		return fmt.Errorf("git cache: %w", err)
	}
	unlock, err := fileLock(ctx, mirror+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	return f()
}

// syncMirror opens (or makes) the bare mirror at path and fetches all
// branches from cloneURL into it.
func syncMirror(ctx context.Context, path, cloneURL string, auth transport.AuthMethod) (*git.Repository, error) {
	st := filesystem.NewStorage(osfs.New(path), cache.NewObjectLRU(objectCacheSize))
	repo, err := git.Open(st, nil)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.Init(st, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("open mirror %s: %w", path, err)
	}
	cfg, err := repo.Config()
	if err != nil {
		return nil, fmt.Errorf("mirror %s config: %w", path, err)
	}
	remote := &config.RemoteConfig{Name: "origin", URLs: []string{cloneURL}, Fetch: []config.RefSpec{mirrorRefSpec}, Mirror: true}
	if old, ok := cfg.Remotes["origin"]; !ok || len(old.URLs) != 1 || old.URLs[0] != cloneURL {
		cfg.Remotes["origin"] = remote
		if err := repo.SetConfig(cfg); err != nil {
			return nil, fmt.Errorf("mirror %s config: %w", path, err)
		}
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{mirrorRefSpec},
		Auth:       auth,
		Tags:       git.NoTags,
		Prune:      true,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return repo, nil
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return nil, fmt.Errorf("fetch %s: the repository is empty", cloneURL)
	default:
		return nil, fmt.Errorf("fetch %s: %w", cloneURL, err)
	}
}

// emptyDir makes dir if missing and fails if it has anything in it.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("%s is not empty", dir)
		}
		return err
	}
	return nil
}

// linkTree hard-links every regular file under src into dst (copying where
// links are impossible, e.g. across file systems), skipping temporary files.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == src {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), "tmp") {
			return nil
		}
		if err := os.Link(p, target); err != nil && !errors.Is(err, fs.ErrExist) {
			return copyFile(p, target)
		}
		// Shared with the mirror: nothing may write to it in place (git
		// never does; the sandbox's CopyOut leaves .git alone).
		return os.Chmod(target, 0o444)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
