package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
)

// Host files a minimal image is made of (Debian's busybox-static and bash-static).
const (
	busyboxPath = "/bin/busybox"
	bashPath    = "/bin/bash-static"
)

// ImportMinimal makes the image tag from this host's busybox (and bash,
// when withBash is set), without a registry: the offline demo's sandbox and
// the tests' images. It needs Debian's busybox-static (and bash-static).
func (d *Docker) ImportMinimal(ctx context.Context, tag string, withBash bool) error {
	rootfs, err := MinimalRootFS(withBash)
	if err != nil {
		return fmt.Errorf("assemble %s: %w", tag, err)
	}
	rc, err := d.cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, tag, image.ImportOptions{
		Changes: []string{
			`ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
			`CMD ["/bin/sh"]`,
		},
	})
	if err != nil {
		return fmt.Errorf("import %s: %w", tag, err)
	}
	msg, _ := io.ReadAll(rc)
	rc.Close()
	if _, err := d.cli.ImageInspect(ctx, tag); err != nil {
		return fmt.Errorf("import %s: %w (%s)", tag, err, msg)
	}
	return nil
}

// MinimalRootFS assembles a minimal image's root file system as a tar archive:
// /bin/busybox with a link for each applet, optionally /bin/bash, and the
// few files a shell expects.
func MinimalRootFS(withBash bool) ([]byte, error) {
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
