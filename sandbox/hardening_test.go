package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohands/gohands/sandbox"
)

// TestCopyOutHardLinkIntoGit: a hard link the agent makes to a file of the
// workspace's .git never brings the host's own .git file out, and does not
// break the copy.
func TestCopyOutHardLinkIntoGit(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		ctx := context.Background()
		src := t.TempDir()
		os.MkdirAll(filepath.Join(src, ".git"), 0o755)
		os.WriteFile(filepath.Join(src, ".git", "config"), []byte("[core]\n\tsandbox = yes\n"), 0o644)
		os.WriteFile(filepath.Join(src, "a.txt"), []byte("a\n"), 0o644)
		sb := start(t, sandbox.Spec{})
		if err := sb.CopyIn(ctx, src); err != nil {
			t.Fatal(err)
		}
		run(t, sb, "ln .git/config leak.txt && chmod 4755 a.txt")
		dst := t.TempDir()
		os.MkdirAll(filepath.Join(dst, ".git"), 0o755)
		os.WriteFile(filepath.Join(dst, ".git", "config"), []byte("[host] secret-ish\n"), 0o644)
		if err := sb.CopyOut(ctx, dst); err != nil {
			t.Fatalf("CopyOut: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "leak.txt")); err == nil && strings.Contains(string(b), "host") {
			t.Errorf("leak.txt carries the host's .git/config: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(dst, ".git", "config")); string(b) != "[host] secret-ish\n" {
			t.Errorf("the host's .git/config changed: %q", b)
		}
		fi, err := os.Stat(filepath.Join(dst, "a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("a.txt mode %v, want 0755 without setuid", fi.Mode())
		}
	})
}

// TestWriteFileThroughSymlink: editing a symlink edits its target, as the
// process driver and every editor do (CLAUDE.md -> AGENTS.md).
func TestWriteFileThroughSymlink(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		ctx := context.Background()
		sb := start(t, sandbox.Spec{})
		run(t, sb, "printf 'old\\n' > real.md && ln -s real.md link.md")
		if err := sb.WriteFile(ctx, "link.md", []byte("new\n"), 0); err != nil {
			t.Fatal(err)
		}
		res := run(t, sb, "cat real.md; [ -L link.md ] && echo still-a-link")
		if !strings.Contains(res.Output, "new") || !strings.Contains(res.Output, "still-a-link") {
			t.Errorf("after writing link.md:\n%s", res.Output)
		}
	})
}

// TestReadFileRefusesHugeFiles: a file over MaxReadFile is not loaded into
// gohands' memory.
func TestReadFileRefusesHugeFiles(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{})
		run(t, sb, "head -c 17000000 /dev/zero > big.bin")
		_, err := sb.ReadFile(context.Background(), "big.bin")
		if !errors.Is(err, sandbox.ErrTooLarge) || !strings.Contains(err.Error(), "terminal") {
			t.Fatalf("ReadFile of 17 MB: %v, want ErrTooLarge with a hint", err)
		}
	})
}

// TestResetKillsTheOldShell: a reset leaves nothing of the old shell behind,
// background jobs included.
func TestResetKillsTheOldShell(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		ctx := context.Background()
		sb := start(t, sandbox.Spec{})
		run(t, sb, "sleep 1234 >/dev/null 2>&1 &")
		if _, err := sb.Exec(ctx, sandbox.Command{Reset: true}); err != nil {
			t.Fatal(err)
		}
		res := run(t, sb, "for d in /proc/[0-9]*; do cat $d/cmdline 2>/dev/null | tr '\\0' ' '; echo; done | grep -c '^sleep 1234' || true")
		if strings.TrimSpace(strings.Split(res.Output, "\n")[0]) != "0" {
			t.Errorf("the old shell's background job survived the reset:\n%s", res.Output)
		}
	})
}
