package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// writeTar streams the tree under src as a tar archive into w. Symlinks are
// stored as links, never followed; owners are root inside the sandbox.
func writeTar(w io.Writer, src string) error {
	tw := tar.NewWriter(w)
	buf := make([]byte, 256*1024)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(tw, f, buf)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", src, err)
	}
	return tw.Close()
}

// extractOptions says how extractTar maps an archive onto a directory.
type extractOptions struct {
	// stripFirst drops the first path component of every entry (the
	// workspace directory's own name in an archive made by Docker).
	stripFirst bool
	// keepGit leaves the top-level .git of dst alone: nothing is written
	// into it nor deleted from it, whatever the archive holds.
	keepGit bool
	// mirror deletes what dst holds and the archive does not.
	mirror bool
}

// ErrUnsafePath is returned when an archive entry would land outside the
// destination directory.
var ErrUnsafePath = errors.New("unsafe path in archive")

// extractTar writes the archive read from r into dst through an os.Root, so
// that no entry and no symlink can reach outside dst. Modes, symlinks (as
// links), binary content and, with mirror, deletions are carried over.
// Files whose content is unchanged are not rewritten.
func extractTar(r io.Reader, dst string, opt extractOptions) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("open %s: %w", dst, err)
	}
	defer root.Close()

	seen := map[string]bool{".": true}
	dirs := map[string]bool{".": true} // directories made or checked in this run
	written := map[string]bool{}       // regular files written in this run
	var dirModes []dirMode
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name, ok, err := entryName(hdr.Name, opt.stripFirst)
		if err != nil {
			return err
		}
		if !ok || (opt.keepGit && isGitPath(name)) {
			continue
		}
		parent := path.Dir(name)
		if !dirs[parent] {
			if err := ensureDir(root, parent, dirs); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
		}
		seen[name] = true
		// Only permissions cross: setuid, setgid and sticky bits stay out.
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := ensureDir(root, name, dirs); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			// Directories stay usable by gohands, whatever the sandbox made of them.
			dirModes = append(dirModes, dirMode{name, mode | 0o700})
		case tar.TypeReg:
			if err := writeFile(root, name, tr, hdr.Size, mode); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			written[name] = true
		case tar.TypeSymlink:
			if err := writeSymlink(root, name, hdr.Linkname); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			target, ok, err := entryName(hdr.Linkname, opt.stripFirst)
			if err != nil || !ok {
				return fmt.Errorf("%s: hard link to %q: %w", hdr.Name, hdr.Linkname, ErrUnsafePath)
			}
			// Only to a regular file this archive wrote: never to what the
			// destination held before (the host's own .git above all).
			if !written[target] {
				delete(seen, name)
				continue
			}
			if err := copyWithin(root, target, name); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			written[name] = true
		default:
			// Devices, fifos and the like have no place in a workspace.
			delete(seen, name)
		}
	}
	if opt.mirror {
		if err := prune(root, seen, opt.keepGit); err != nil {
			return err
		}
	}
	// Deepest first, so that a read-only directory is closed last.
	slices.SortFunc(dirModes, func(a, b dirMode) int { return len(b.name) - len(a.name) })
	for _, d := range dirModes {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return fmt.Errorf("chmod %s: %w", d.name, err)
		}
	}
	return nil
}

type dirMode struct {
	name string
	mode fs.FileMode
}

// entryName cleans an archive entry name into a slash path relative to the
// destination. It rejects absolute paths and any ".." component; ok is false
// for the entry that names the destination itself.
func entryName(name string, stripFirst bool) (string, bool, error) {
	n := strings.TrimSuffix(name, "/")
	if strings.HasPrefix(n, "/") || strings.Contains(n, "\\") {
		return "", false, fmt.Errorf("entry %q: %w", name, ErrUnsafePath)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", false, fmt.Errorf("entry %q: %w", name, ErrUnsafePath)
		}
	}
	n = path.Clean(n)
	if stripFirst {
		_, rest, found := strings.Cut(n, "/")
		if !found {
			return "", false, nil
		}
		n = path.Clean(rest)
	}
	if n == "." || n == "" {
		return "", false, nil
	}
	return n, true, nil
}

func isGitPath(name string) bool {
	return name == ".git" || strings.HasPrefix(name, ".git/")
}

// ensureDir makes name a real directory (replacing a file or a symlink that
// stands there), checking each parent the same way.
func ensureDir(root *os.Root, name string, dirs map[string]bool) error {
	if dirs[name] {
		return nil
	}
	if parent := path.Dir(name); !dirs[parent] {
		if err := ensureDir(root, parent, dirs); err != nil {
			return err
		}
	}
	fi, err := root.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		if err := root.Remove(name); err != nil {
			return err
		}
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Mkdir(name, 0o755); err != nil {
			return err
		}
	default:
		return err
	}
	dirs[name] = true
	return nil
}

// sameContentLimit bounds the size of files compared with what is on disk
// before writing; larger files are always rewritten.
const sameContentLimit = 8 << 20

// writeFile writes a regular file unless the same content and mode are
// already there. An existing symlink or directory at name is replaced, never
// written through.
func writeFile(root *os.Root, name string, r io.Reader, size int64, mode fs.FileMode) error {
	fi, err := root.Lstat(name)
	exists := err == nil
	if exists && !fi.Mode().IsRegular() {
		if err := root.RemoveAll(name); err != nil {
			return err
		}
		exists = false
	}
	if exists && fi.Size() == size && size <= sameContentLimit {
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		old, err := root.ReadFile(name)
		if err == nil && bytes.Equal(old, data) {
			if fi.Mode().Perm() != mode.Perm() {
				return root.Chmod(name, mode)
			}
			return nil
		}
		r = bytes.NewReader(data)
	}
	if exists {
		// A fresh inode: the old one may be hard-linked elsewhere.
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeSymlink makes name a symlink to target, replacing what is there.
// The target is stored as it is and never followed.
func writeSymlink(root *os.Root, name, target string) error {
	fi, err := root.Lstat(name)
	if err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			if old, err := root.Readlink(name); err == nil && old == target {
				return nil
			}
		}
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	}
	return root.Symlink(target, name)
}

// copyWithin copies the regular file src to dst, both inside root, for hard
// links in an archive.
func copyWithin(root *os.Root, src, dst string) error {
	fi, err := root.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("hard link to %s, which is not a regular file", src)
	}
	f, err := root.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFile(root, dst, f, fi.Size(), fi.Mode().Perm())
}

// prune deletes from root what is not in keep, without following symlinks.
func prune(root *os.Root, keep map[string]bool, keepGit bool) error {
	var gone []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if keepGit && isGitPath(p) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !keep[p] {
			gone = append(gone, p)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list workspace copy: %w", err)
	}
	for _, p := range gone {
		if err := root.RemoveAll(p); err != nil {
			return fmt.Errorf("delete %s: %w", p, err)
		}
	}
	return nil
}
