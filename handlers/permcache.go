package handlers

import (
	"strings"
	"sync"
	"time"
)

// PermissionTTL is how long a person's permission on a repository, once
// asked of GitHub, is trusted. It spares GitHub (and the webhook's answer)
// an API call per comment in a busy thread; a revoked permission is
// honoured for at most this long.
const PermissionTTL = 30 * time.Second

// maxCachedPermissions bounds the cache; past it, it starts afresh.
const maxCachedPermissions = 10000

// permCache remembers write permissions for PermissionTTL.
type permCache struct {
	mu      sync.Mutex
	entries map[string]permEntry
	now     func() time.Time
}

type permEntry struct {
	canWrite bool
	at       time.Time
}

func newPermCache() *permCache {
	return &permCache{entries: map[string]permEntry{}, now: time.Now}
}

func permKey(owner, repo, user string) string {
	return strings.ToLower(owner + "/" + repo + "\x00" + user)
}

func (c *permCache) get(owner, repo, user string) (canWrite, ok bool) {
	if c == nil {
		return false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[permKey(owner, repo, user)]
	if !ok || c.now().Sub(e.at) >= PermissionTTL {
		return false, false
	}
	return e.canWrite, true
}

func (c *permCache) put(owner, repo, user string, canWrite bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedPermissions {
		c.entries = map[string]permEntry{}
	}
	c.entries[permKey(owner, repo, user)] = permEntry{canWrite: canWrite, at: c.now()}
}
