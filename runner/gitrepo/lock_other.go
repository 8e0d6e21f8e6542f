//go:build !unix

package gitrepo

import "context"

// fileLock is a no-op where flock is not available; the in-process lock
// still serializes jobs of one gohands process.
func fileLock(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, nil
}
