// Package sandboxtest gives tests a Docker driver and small sandbox images
// built on this machine from Debian's busybox-static and bash-static, so that
// tests need neither a registry nor the full sandbox image.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/gohands/gohands/sandbox"
)

// Image tags of the test images. Bump the version when their content changes.
const (
	// BashImage has busybox applets and bash as /bin/bash.
	BashImage = "gohands-sandbox-test:1"
	// ShImage has busybox applets only: no bash, for the sh fallback.
	ShImage = "gohands-sandbox-test-sh:1"
)

// MustDocker returns a docker driver with a fresh instance id, or skips the
// test when no engine answers, unless CI=true, where it fails. Containers the
// test leaves behind are reaped at cleanup.
func MustDocker(tb testing.TB) *sandbox.Docker {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := sandbox.NewDocker(ctx, sandbox.DockerOptions{Instance: "test-" + randomHex()})
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("CI=true and no Docker engine: %v", err)
		}
		tb.Skipf("no Docker engine (set CI=true to fail instead): %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := d.Reap(ctx); err != nil {
			tb.Errorf("reap test sandboxes: %v", err)
		}
		d.Close()
	})
	return d
}

var (
	buildMu sync.Mutex
	built   = map[string]bool{}
)

// MustImage returns the tag of the busybox+bash test image, building it once.
func MustImage(tb testing.TB) string {
	tb.Helper()
	return mustBuild(tb, MustDocker(tb), BashImage, true)
}

// MustShImage returns the tag of the test image without bash, building it once.
func MustShImage(tb testing.TB) string {
	tb.Helper()
	return mustBuild(tb, MustDocker(tb), ShImage, false)
}

func mustBuild(tb testing.TB, d *sandbox.Docker, tag string, withBash bool) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if built[tag] {
		return tag
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := d.Client().ImageInspect(ctx, tag); err == nil {
		built[tag] = true
		return tag
	} else if !cerrdefs.IsNotFound(err) {
		tb.Fatalf("inspect %s: %v", tag, err)
	}
	if err := d.ImportMinimal(ctx, tag, withBash); err != nil {
		tb.Fatalf("build %s: %v", tag, err)
	}
	built[tag] = true
	return tag
}

func randomHex() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
