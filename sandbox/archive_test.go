package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestEntryName(t *testing.T) {
	for _, tc := range []struct {
		in         string
		stripFirst bool
		want       string
		ok         bool
		unsafe     bool
	}{
		{"a/b.txt", false, "a/b.txt", true, false},
		{"./a/b/", false, "a/b", true, false},
		{"workspace/a", true, "a", true, false},
		{"workspace/", true, "", false, false},
		{"workspace", true, "", false, false},
		{"../evil", false, "", false, true},
		{"workspace/../../evil", true, "", false, true},
		{"a/../../evil", false, "", false, true},
		{"a/..", false, "", false, true},
		{"/etc/passwd", false, "", false, true},
		{`a\..\evil`, false, "", false, true},
		{".", false, "", false, false},
	} {
		got, ok, err := entryName(tc.in, tc.stripFirst)
		if got != tc.want || ok != tc.ok || errors.Is(err, ErrUnsafePath) != tc.unsafe {
			t.Errorf("entryName(%q, %v) = %q, %v, %v", tc.in, tc.stripFirst, got, ok, err)
		}
	}
}

type entry struct {
	name, link, body string
	typ              byte
	mode             int64
}

func mustTar(tb testing.TB, entries ...entry) *bytes.Buffer {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return &buf
}

func TestExtractRejectsEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
	}{
		{"dotdot", []entry{{name: "../escaped", typ: tar.TypeReg, body: "x"}}},
		{"nested dotdot", []entry{{name: "a/", typ: tar.TypeDir}, {name: "a/../../escaped", typ: tar.TypeReg, body: "x"}}},
		{"absolute", []entry{{name: "/escaped", typ: tar.TypeReg, body: "x"}}},
		{"hard link out", []entry{{name: "h", typ: tar.TypeLink, link: "../escaped"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			err := extractTar(mustTar(t, tc.entries...), dst, extractOptions{})
			if !errors.Is(err, ErrUnsafePath) {
				t.Errorf("err = %v, want ErrUnsafePath", err)
			}
			if _, err := os.Lstat(filepath.Join(parent, "escaped")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a file was written outside dst")
			}
		})
	}
}

func TestExtractNeverWritesThroughSymlinks(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("original"), 0o644)
	dst := t.TempDir()
	// dst already holds links to the outside, as a previous run could have left.
	os.Symlink(victim, filepath.Join(dst, "file-link"))
	os.Symlink(outside, filepath.Join(dst, "dir-link"))

	err := extractTar(mustTar(t,
		entry{name: "file-link", typ: tar.TypeReg, body: "new content"},
		entry{name: "dir-link/", typ: tar.TypeDir},
		entry{name: "dir-link/victim", typ: tar.TypeReg, body: "overwritten?"},
		entry{name: "made-link", typ: tar.TypeSymlink, link: outside},
		entry{name: "made-link/victim", typ: tar.TypeReg, body: "through a new link?"},
	), dst, extractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original" {
		t.Fatalf("wrote through a symlink: victim = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "file-link")); string(b) != "new content" {
		t.Errorf("file-link = %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "made-link")); err != nil || !fi.IsDir() {
		t.Errorf("made-link should have become a real directory: %v %v", fi, err)
	}
}

func TestExtractMirrorKeepsGit(t *testing.T) {
	dst := t.TempDir()
	os.MkdirAll(filepath.Join(dst, ".git"), 0o755)
	os.WriteFile(filepath.Join(dst, ".git", "HEAD"), []byte("host"), 0o644)
	os.WriteFile(filepath.Join(dst, "stale.txt"), []byte("stale"), 0o644)
	os.MkdirAll(filepath.Join(dst, "staledir/sub"), 0o755)
	err := extractTar(mustTar(t,
		entry{name: "w/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "w/.git/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "w/.git/HEAD", typ: tar.TypeReg, body: "sandbox"},
		entry{name: "w/.git/planted", typ: tar.TypeReg, body: "x"},
		entry{name: "w/ro/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "w/ro/f", typ: tar.TypeReg, body: "in a read-only dir", mode: 0o444},
	), dst, extractOptions{stripFirst: true, keepGit: true, mirror: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, ".git", "HEAD")); string(b) != "host" {
		t.Errorf(".git/HEAD = %q", b)
	}
	for _, p := range []string{".git/planted", "stale.txt", "staledir"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after the mirror", p)
		}
	}
	// git tracks no directory modes; the host keeps its directories usable.
	if fi, err := os.Stat(filepath.Join(dst, "ro")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("ro: %v %v, want 0755", fi, err)
	}
	os.Chmod(filepath.Join(dst, "ro"), 0o755) // let TempDir clean up
}
