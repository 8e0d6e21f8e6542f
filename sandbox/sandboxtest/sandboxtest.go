// Package sandboxtest gives tests a Docker driver and small sandbox images
// built on this machine from Debian's busybox-static and bash-static, so that
// tests need neither a registry nor the full sandbox image.
package sandboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"

	"github.com/gohands/gohands/sandbox"
)

// Image tags of the test images. Bump the version when their content changes.
const (
	// BashImage has busybox applets and bash as /bin/bash.
	BashImage = "gohands-sandbox-test:1"
	// ShImage has busybox applets only: no bash, for the sh fallback.
	ShImage = "gohands-sandbox-test-sh:1"
)

// Host files the images are made of (Debian's busybox-static and bash-static).
const (
	busyboxPath = "/bin/busybox"
	bashPath    = "/bin/bash-static"
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
	rootfs, err := RootFS(withBash)
	if err != nil {
		tb.Fatalf("assemble %s: %v", tag, err)
	}
	rc, err := d.Client().ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, tag, image.ImportOptions{
		Changes: []string{
			`ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
			`CMD ["/bin/sh"]`,
		},
	})
	if err != nil {
		tb.Fatalf("import %s: %v", tag, err)
	}
	msg, _ := io.ReadAll(rc)
	rc.Close()
	if _, err := d.Client().ImageInspect(ctx, tag); err != nil {
		tb.Fatalf("import %s: %v (%s)", tag, err, msg)
	}
	built[tag] = true
	return tag
}

// RootFS assembles the test image's root file system as a tar archive:
// /bin/busybox with a link for each applet, optionally /bin/bash, and the
// few files a shell expects.
func RootFS(withBash bool) ([]byte, error) {
	list, err := exec.Command(busyboxPath, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full (apt-get install busybox-static): %w", busyboxPath, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := map[string]bool{}
	var addDir func(string, int64) error
	addDir = func(d string, mode int64) error {
		if d == "." || d == "/" || d == "" || dirs[d] {
			return nil
		}
		if err := addDir(path.Dir(d), 0o755); err != nil {
			return err
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: now})
	}
	addFile := func(name string, data []byte, mode int64) error {
		if err := addDir(path.Dir(name), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"tmp", "root", "proc", "sys", "dev", "etc", "workspace", "usr/local/bin", "var/tmp"} {
		mode := int64(0o755)
		if d == "tmp" || d == "var/tmp" {
			mode = 0o1777
		}
		if err := addDir(d, mode); err != nil {
			return nil, err
		}
	}
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, err
	}
	if err := addFile("bin/busybox", bb, 0o755); err != nil {
		return nil, err
	}
	if withBash {
		bash, err := os.ReadFile(bashPath)
		if err != nil {
			return nil, fmt.Errorf("read %s (apt-get install bash-static): %w", bashPath, err)
		}
		if err := addFile("bin/bash", bash, 0o755); err != nil {
			return nil, err
		}
	}
	for _, l := range strings.Fields(string(list)) {
		name := strings.TrimPrefix(path.Clean("/"+l), "/")
		if name == "bin/busybox" || name == "bin/bash" || strings.HasSuffix(name, "/bash") {
			continue
		}
		if err := addDir(path.Dir(name), 0o755); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: "/bin/busybox", Mode: 0o777, ModTime: now}); err != nil {
			return nil, err
		}
	}
	files := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":    "root:x:0:\nnogroup:x:65534:\n",
		"etc/hostname": "sandbox\n",
	}
	for _, name := range []string{"etc/passwd", "etc/group", "etc/hostname"} {
		if err := addFile(name, []byte(files[name]), 0o644); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func randomHex() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
