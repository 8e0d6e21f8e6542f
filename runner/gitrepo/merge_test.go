package gitrepo

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

func TestOverlapping(t *testing.T) {
	set := func(paths ...string) map[string]*treeEntry {
		m := map[string]*treeEntry{}
		for _, p := range paths {
			m[p] = &treeEntry{}
		}
		return m
	}
	tests := []struct {
		name string
		a, b map[string]*treeEntry
		want string
	}{
		{"disjoint", set("a.go", "dir/b.go"), set("c.go", "dir/d.go"), ""},
		{"same file", set("a.go", "x"), set("a.go"), "a.go"},
		{"file where a directory was changed", set("docs/usage.md"), set("docs"), "docs"},
		{"directory where a file was changed", set("docs"), set("docs/a/b.md"), "docs"},
		{"prefix is not a directory", set("doc"), set("docs/a.md"), ""},
		{"empty", set(), set("a"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(overlapping(tt.a, tt.b), ","); got != tt.want {
				t.Errorf("overlapping = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	git("init", "--quiet", "--bare")
	s := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	blob, err := s.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	h, err := writeTree(s, map[string]treeEntry{
		"a.txt": {filemode.Regular, blob},
		"a/b":   {filemode.Executable, blob},
		"a-b":   {filemode.Symlink, blob},
		"z/y/x": {filemode.Regular, blob},
	})
	if err != nil {
		t.Fatal(err)
	}
	// fsck checks every object, unreachable ones too: it rejects trees in
	// the wrong order ("a" sorts as "a/", after "a-b" and "a.txt").
	git("fsck", "--strict", "--no-progress")
	got := git("ls-tree", "-r", "--format=%(objectmode) %(path)", h.String())
	want := "120000 a-b\n100644 a.txt\n100755 a/b\n100644 z/y/x\n"
	if got != want {
		t.Errorf("ls-tree = %q, want %q", got, want)
	}
}
