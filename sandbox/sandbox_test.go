package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/sandbox/sandboxtest"
)

// driverCase starts sandboxes of one driver (and image) for the shared tests.
type driverCase struct {
	name  string
	start func(tb testing.TB, spec sandbox.Spec) sandbox.Sandbox
}

func drivers() []driverCase {
	return []driverCase{
		{"docker-bash", func(tb testing.TB, spec sandbox.Spec) sandbox.Sandbox {
			tb.Helper()
			d := sandboxtest.MustDocker(tb)
			spec.Image = sandboxtest.MustImage(tb)
			return mustStart(tb, d, spec)
		}},
		{"docker-sh", func(tb testing.TB, spec sandbox.Spec) sandbox.Sandbox {
			tb.Helper()
			d := sandboxtest.MustDocker(tb)
			spec.Image = sandboxtest.MustShImage(tb)
			return mustStart(tb, d, spec)
		}},
		{"process", func(tb testing.TB, spec sandbox.Spec) sandbox.Sandbox {
			tb.Helper()
			return mustStart(tb, mustProcess(tb), spec)
		}},
	}
}

func mustProcess(tb testing.TB) *sandbox.Process {
	tb.Helper()
	p, err := sandbox.NewProcess(sandbox.ProcessOptions{Instance: "test", BaseDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func mustStart(tb testing.TB, d sandbox.Driver, spec sandbox.Spec) sandbox.Sandbox {
	tb.Helper()
	if spec.JobID == "" {
		spec.JobID = "test"
	}
	sb, err := d.Start(context.Background(), spec)
	if err != nil {
		tb.Fatalf("start %s sandbox: %v", d.Name(), err)
	}
	tb.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return sb
}

func mustExec(tb testing.TB, sb sandbox.Sandbox, cmd sandbox.Command) sandbox.Result {
	tb.Helper()
	res, err := sb.Exec(context.Background(), cmd)
	if err != nil {
		tb.Fatalf("exec %q: %v (result %+v)", cmd.Command, err, res)
	}
	return res
}

func run(tb testing.TB, sb sandbox.Sandbox, command string) sandbox.Result {
	tb.Helper()
	return mustExec(tb, sb, sandbox.Command{Command: command, Timeout: 20 * time.Second})
}

// forEachDriver runs test against every driver, in parallel (the tests
// mostly wait on the engine and on timeouts).
func forEachDriver(t *testing.T, test func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox)) {
	forEachDriverSerial(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		t.Parallel()
		test(t, start)
	})
}

// forEachDriverSerial runs test against every driver, one after the other,
// for tests that change the process environment.
func forEachDriverSerial(t *testing.T, test func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox)) {
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) { test(t, d.start) })
	}
}

func TestShellStatePersists(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{Env: map[string]string{"GREETING": "hello"}})
		res := run(t, sb, "pwd")
		if got := strings.TrimSpace(res.Output); got != sb.WorkDir() || res.Cwd != sb.WorkDir() {
			t.Fatalf("pwd = %q, cwd %q; want %q", got, res.Cwd, sb.WorkDir())
		}
		run(t, sb, "mkdir -p sub/dir && cd sub/dir && export FOO='a b' && BAR=c")
		res = run(t, sb, `echo "$PWD|$FOO|$BAR|$GREETING"`)
		want := sb.WorkDir() + "/sub/dir|a b|c|hello\n"
		if res.Output != want || res.ExitCode != 0 {
			t.Fatalf("got %q (exit %d), want %q", res.Output, res.ExitCode, want)
		}
		if res.Cwd != sb.WorkDir()+"/sub/dir" {
			t.Errorf("Cwd = %q", res.Cwd)
		}
	})
}

func TestShellExitCodesAndQuoting(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{})
		long := strings.Repeat("x", 10000)
		for _, tc := range []struct {
			cmd  string
			out  string
			code int
		}{
			{"true", "", 0},
			{"false", "", 1},
			{"exit_with() { return $1; }; exit_with 42", "", 42},
			{`echo 'single '"'"'quoted'"'"' and "double"'`, "single 'quoted' and \"double\"\n", 0},
			{"echo one\necho two", "one\ntwo\n", 0},
			{"printf 'no newline'", "no newline", 0},
			{"echo 'unclosed", "", 2}, // a syntax error must not hang the shell
			{"echo " + long + " | wc -c", "10001", 0},
			{"echo err >&2", "err\n", 0},
			{"nosuchcommand-xyz", "", 127},
		} {
			res := run(t, sb, tc.cmd)
			out := res.Output
			if tc.cmd == "echo 'unclosed" {
				out = ""
			}
			if strings.HasSuffix(tc.cmd, "wc -c") {
				out = strings.TrimSpace(out)
			}
			if tc.cmd == "nosuchcommand-xyz" {
				out = ""
			}
			if out != tc.out || res.ExitCode != tc.code {
				t.Errorf("%.40q: got %q exit %d, want %q exit %d", tc.cmd, res.Output, res.ExitCode, tc.out, tc.code)
			}
		}
	})
}

func TestShellTimeoutKeepsShellUsable(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{})
		run(t, sb, "cd /tmp && export KEEP=yes")
		for _, cmd := range []string{"sleep 60", "while :; do :; done", "trap '' INT; sleep 60"} {
			start := time.Now()
			res := mustExec(t, sb, sandbox.Command{Command: cmd, Timeout: 500 * time.Millisecond})
			if !res.TimedOut || res.Running {
				t.Errorf("%q: TimedOut=%v Running=%v, want timed out and not running", cmd, res.TimedOut, res.Running)
			}
			if el := time.Since(start); el > 15*time.Second {
				t.Errorf("%q: took %s to interrupt", cmd, el)
			}
			res = run(t, sb, `echo "$PWD $KEEP"`)
			if res.Output != "/tmp yes\n" && !strings.Contains(cmd, "trap") {
				t.Errorf("after %q: shell state lost: %q", cmd, res.Output)
			}
			if res.ExitCode != 0 || !strings.Contains(res.Output, "/tmp") && !strings.Contains(cmd, "trap") {
				t.Errorf("after %q: shell unusable: %+v", cmd, res)
			}
		}
		// A caller that gives up (cancelled ctx) gets an error at once; the
		// command is interrupted before the next one.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, err := sb.Exec(ctx, sandbox.Command{Command: "sleep 60", Timeout: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("exec with an expiring ctx: err = %v", err)
		}
		res := run(t, sb, "echo alive")
		if res.Output != "alive\n" {
			t.Errorf("shell not usable at the end: %q", res.Output)
		}
	})
}

func TestShellOutputIsCapped(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{MaxOutput: 2000})
		res := run(t, sb, "seq 1 100000")
		if len(res.Output) > 2100 {
			t.Errorf("output is %d characters, want about 2000", len(res.Output))
		}
		if !strings.HasPrefix(res.Output, "1\n2\n3\n") || !strings.HasSuffix(res.Output, "99999\n100000\n") {
			t.Errorf("head or tail lost: %.60q ... %.60q", res.Output, res.Output[max(0, len(res.Output)-60):])
		}
		if !strings.Contains(res.Output, "characters cut") {
			t.Errorf("no cut marker in %q", res.Output)
		}
		// The default cap applies when MaxOutput is zero.
		sb2 := start(t, sandbox.Spec{})
		res = run(t, sb2, "seq 1 200000")
		if len(res.Output) > sandbox.DefaultMaxOutput+100 || !strings.Contains(res.Output, "characters cut") {
			t.Errorf("default cap: %d characters", len(res.Output))
		}
	})
}

func TestShellInput(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{})
		res := mustExec(t, sb, sandbox.Command{Command: `printf 'Name? '; read name; echo "hello $name"`, Timeout: 500 * time.Millisecond})
		if !res.Running || res.ExitCode != -1 || !strings.Contains(res.Output, "Name? ") {
			t.Fatalf("waiting for input: %+v", res)
		}
		res = mustExec(t, sb, sandbox.Command{Command: "Ada", IsInput: true, Timeout: 5 * time.Second})
		if res.Running || res.ExitCode != 0 || res.Output != "hello Ada\n" {
			t.Fatalf("after input: %+v", res)
		}

		// C-c ends a prompt; the shell stays.
		res = mustExec(t, sb, sandbox.Command{Command: `printf 'Continue? [y/N] '; read answer`, Timeout: 500 * time.Millisecond})
		if !res.Running {
			t.Fatalf("prompt: %+v", res)
		}
		res = mustExec(t, sb, sandbox.Command{Command: "C-c", IsInput: true, Timeout: 5 * time.Second})
		if res.Running || res.ExitCode == 0 {
			t.Fatalf("after C-c: %+v", res)
		}

		// C-d ends cat's input.
		res = mustExec(t, sb, sandbox.Command{Command: `printf '> '; cat; echo "cat done $?"`, Timeout: 500 * time.Millisecond})
		if !res.Running {
			t.Fatalf("cat: %+v", res)
		}
		res = mustExec(t, sb, sandbox.Command{Command: "line one", IsInput: true, Timeout: 500 * time.Millisecond})
		if !res.Running || !strings.Contains(res.Output, "line one") {
			t.Fatalf("cat after a line: %+v", res)
		}
		res = mustExec(t, sb, sandbox.Command{Command: "C-d", IsInput: true, Timeout: 5 * time.Second})
		if res.Running || !strings.Contains(res.Output, "cat done 0") {
			t.Fatalf("after C-d: %+v", res)
		}

		// A silent reader, which printed no prompt, is found waiting all
		// the same: the kernel says it is blocked reading the terminal.
		// (Busybox sh's own read builtin waits in poll, which says nothing;
		// the unfinished-line guess then decides, as for the prompts above.)
		res = mustExec(t, sb, sandbox.Command{Command: `head -n 1`, Timeout: 500 * time.Millisecond})
		if !res.Running || res.TimedOut {
			t.Fatalf("silent reader: %+v; want it left running for input", res)
		}
		res = mustExec(t, sb, sandbox.Command{Command: "sesame", IsInput: true, Timeout: 5 * time.Second})
		if res.Running || res.Output != "sesame\n" {
			t.Fatalf("silent reader after input: %+v", res)
		}
		// A command that printed an unfinished line but reads nothing is not
		// waiting for anyone: it is interrupted at its timeout.
		res = mustExec(t, sb, sandbox.Command{Command: `printf 'compiling'; sleep 30`, Timeout: 500 * time.Millisecond})
		if res.Running || !res.TimedOut {
			t.Fatalf("busy command with an unfinished line: %+v; want it interrupted", res)
		}

		// Input with nothing running is an error, not a hang.
		if _, err := sb.Exec(context.Background(), sandbox.Command{Command: "x", IsInput: true}); err == nil {
			t.Error("input with no command running: no error")
		}
		if res := run(t, sb, "echo ok"); res.Output != "ok\n" {
			t.Errorf("shell after input tests: %+v", res)
		}
	})
}

func TestShellBackgroundAndReset(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{})
		begin := time.Now()
		res := run(t, sb, "sleep 30 & echo started")
		if !strings.Contains(res.Output, "started") || time.Since(begin) > 5*time.Second {
			t.Fatalf("background job blocked the command: %+v after %s", res, time.Since(begin))
		}
		res = run(t, sb, "(sleep 0.2; echo late) & echo now")
		if !strings.Contains(res.Output, "now") {
			t.Fatalf("got %+v", res)
		}
		time.Sleep(400 * time.Millisecond)
		res = run(t, sb, "echo next")
		if !strings.Contains(res.Output, "next") {
			t.Fatalf("after background output: %+v", res)
		}
		if strings.Contains(res.Output, "restarted") && !strings.HasPrefix(t.Name(), "TestShellBackgroundAndReset/docker-sh") {
			// Only busybox ash is known to exit when a job ends while it is idle.
			t.Errorf("the shell exited after a background job ended: %+v", res)
		}

		run(t, sb, "export GONE=1; cd /tmp")
		res = mustExec(t, sb, sandbox.Command{Reset: true})
		if res.Cwd != sb.WorkDir() {
			t.Errorf("cwd after reset = %q, want %q", res.Cwd, sb.WorkDir())
		}
		if res := run(t, sb, `echo "[$GONE]"`); res.Output != "[]\n" {
			t.Errorf("variable survived reset: %q", res.Output)
		}
	})
}

func TestFilesReadWrite(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{})
		ctx := context.Background()
		bin := make([]byte, 70000)
		rand.Read(bin)
		if err := sb.WriteFile(ctx, "deep/er/blob.bin", bin, 0o750); err != nil {
			t.Fatal(err)
		}
		got, err := sb.ReadFile(ctx, sb.WorkDir()+"/deep/er/blob.bin")
		if err != nil || !bytes.Equal(got, bin) {
			t.Fatalf("read back: %v (equal %v)", err, bytes.Equal(got, bin))
		}
		if res := run(t, sb, "stat -c %a deep/er/blob.bin"); strings.TrimSpace(res.Output) != "750" {
			t.Errorf("mode inside = %q, want 750", res.Output)
		}
		run(t, sb, "printf 'made inside' > inside.txt && ln -s inside.txt link.txt")
		if got, err := sb.ReadFile(ctx, "link.txt"); err != nil || string(got) != "made inside" {
			t.Errorf("read through link inside: %q, %v", got, err)
		}
		if _, err := sb.ReadFile(ctx, "missing.txt"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
		}
	})
}

// mustTree writes files into a new temporary directory: name → content,
// with modes and symlinks given by the helpers below.
func mustTree(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func TestCopyInOut(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		ctx := context.Background()
		bin := make([]byte, 100000)
		rand.Read(bin)
		src := mustTree(t, map[string]string{
			"README.md":        "hello\n",
			"script.sh":        "#!/bin/sh\necho hi\n",
			"secret-mode":      "private\n",
			"gone.txt":         "delete me\n",
			"dir/nested.txt":   "nested\n",
			"dir/old-dir/a":    "a\n",
			"link-to-readme":   "->README.md",
			"blob.bin":         string(bin),
			".git/HEAD":        "ref: refs/heads/main\n",
			".git/config":      "[core]\n",
			"sub/.git":         "gitdir: ../.git/modules/sub\n", // only the top-level .git is the host's
			"unchanged/keep.c": "int main(){}\n",
		})
		os.Chmod(filepath.Join(src, "script.sh"), 0o755)
		os.Chmod(filepath.Join(src, "secret-mode"), 0o600)

		sb := start(t, sandbox.Spec{})
		if err := sb.CopyIn(ctx, src); err != nil {
			t.Fatal(err)
		}
		res := run(t, sb, "cat .git/HEAD && stat -c '%a %n' script.sh secret-mode && readlink link-to-readme && cat link-to-readme && ./script.sh")
		want := "ref: refs/heads/main\n755 script.sh\n600 secret-mode\nREADME.md\nhello\nhi\n"
		if res.Output != want {
			t.Fatalf("inside after CopyIn:\n%s\nwant:\n%s", res.Output, want)
		}
		if got, err := sb.ReadFile(ctx, "blob.bin"); err != nil || !bytes.Equal(got, bin) {
			t.Fatalf("binary file changed on the way in: %v", err)
		}

		// Change things inside, including what must not come out.
		run(t, sb, strings.Join([]string{
			"echo changed > README.md",
			"rm gone.txt && rm -r dir/old-dir",
			"chmod 600 script.sh && chmod 755 secret-mode",
			"mkdir -p new/dir && printf 'new\\n' > new/dir/file.txt",
			"ln -s /etc/passwd passwd-link",
			"rm link-to-readme && ln -s dir/nested.txt link-to-readme",
			"echo evil > .git/config && echo evil > .git/planted && rm .git/HEAD",
			"printf '\\000\\001\\377binary' > new/bytes.bin",
		}, " && "))

		dst := t.TempDir()
		if err := copyDir(src, dst); err != nil {
			t.Fatal(err)
		}
		unchangedBefore, _ := os.Stat(filepath.Join(dst, "unchanged/keep.c"))
		if err := sb.CopyOut(ctx, dst); err != nil {
			t.Fatal(err)
		}
		checkFile(t, dst, "README.md", "changed\n", 0o644)
		checkFile(t, dst, "script.sh", "#!/bin/sh\necho hi\n", 0o600)
		checkFile(t, dst, "secret-mode", "private\n", 0o755)
		checkFile(t, dst, "new/dir/file.txt", "new\n", 0o644)
		checkFile(t, dst, "new/bytes.bin", "\x00\x01\xffbinary", 0o644)
		checkFile(t, dst, "blob.bin", string(bin), 0o644)
		checkFile(t, dst, "sub/.git", "gitdir: ../.git/modules/sub\n", 0o644)
		for _, gone := range []string{"gone.txt", "dir/old-dir"} {
			if _, err := os.Lstat(filepath.Join(dst, gone)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s not deleted: %v", gone, err)
			}
		}
		checkLink(t, dst, "passwd-link", "/etc/passwd")
		checkLink(t, dst, "link-to-readme", "dir/nested.txt")
		// The host's .git is untouched.
		checkFile(t, dst, ".git/HEAD", "ref: refs/heads/main\n", 0o644)
		checkFile(t, dst, ".git/config", "[core]\n", 0o644)
		if _, err := os.Lstat(filepath.Join(dst, ".git/planted")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf(".git/planted came out: %v", err)
		}
		if after, _ := os.Stat(filepath.Join(dst, "unchanged/keep.c")); !after.ModTime().Equal(unchangedBefore.ModTime()) {
			t.Errorf("an unchanged file was rewritten")
		}
	})
}

func checkFile(tb testing.TB, dir, name, content string, mode fs.FileMode) {
	tb.Helper()
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if err != nil {
		tb.Errorf("%s: %v", name, err)
		return
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != mode {
		tb.Errorf("%s: mode %v, want regular %v", name, fi.Mode(), mode)
	}
	if got, _ := os.ReadFile(p); string(got) != content {
		tb.Errorf("%s: content %.50q, want %.50q", name, got, content)
	}
}

func checkLink(tb testing.TB, dir, name, target string) {
	tb.Helper()
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		tb.Errorf("%s: not a symlink (%v, %v)", name, fi, err)
		return
	}
	if got, _ := os.Readlink(p); got != target {
		tb.Errorf("%s -> %q, want %q", name, got, target)
	}
}

// copyDir copies a tree with os.CopyFS, then restores modes and symlinks it
// does not carry.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm())
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, info.Mode().Perm())
		}
	})
}

func TestNoHostSecretsInside(t *testing.T) {
	secrets := map[string]string{
		"GITHUB_TOKEN":           "ghs_secretGithubToken123",
		"OPENAI_API_KEY":         "sk-secretOpenAIKey456",
		"GITHUB_WEBHOOK_SECRET":  "whsec-secret789",
		"GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----secretpem",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	forEachDriverSerial(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{Env: map[string]string{"ALLOWED": "visible"}})
		cmd := "env; cat /proc/$$/environ | tr '\\0' '\\n'"
		if !strings.HasPrefix(t.Name(), "TestNoHostSecretsInside/process") {
			cmd += "; cat /proc/1/environ | tr '\\0' '\\n'"
		}
		res := run(t, sb, cmd)
		if !strings.Contains(res.Output, "ALLOWED=visible") {
			t.Errorf("Spec.Env missing inside:\n%s", res.Output)
		}
		for k, v := range secrets {
			if strings.Contains(res.Output, v) || strings.Contains(res.Output, k+"=") {
				t.Errorf("%s leaked into the sandbox", k)
			}
		}
	})
}

func TestRunSetupAndPreCommit(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		ctx := context.Background()
		sb := start(t, sandbox.Spec{})
		ran, _, err := sandbox.RunSetup(ctx, sb, 10*time.Second)
		if ran || err != nil {
			t.Fatalf("no setup.sh: ran=%v err=%v", ran, err)
		}
		sb.WriteFile(ctx, ".openhands/setup.sh", []byte("echo setting up; cd /tmp; touch \"$OLDPWD/setup-ran\"; exit 0\n"), 0o644)
		sb.WriteFile(ctx, ".openhands/pre-commit.sh", []byte("echo lint failed >&2; exit 3\n"), 0o644)
		ran, res, err := sandbox.RunSetup(ctx, sb, 10*time.Second)
		if !ran || err != nil || !strings.Contains(res.Output, "setting up") {
			t.Fatalf("setup: ran=%v err=%v res=%+v", ran, err, res)
		}
		if _, err := sb.ReadFile(ctx, "setup-ran"); err != nil {
			t.Errorf("setup did not run in the workspace: %v", err)
		}
		if res := run(t, sb, "pwd"); strings.TrimSpace(res.Output) != sb.WorkDir() {
			t.Errorf("setup moved the agent's shell to %q", res.Output)
		}
		ran, res, err = sandbox.RunPreCommit(ctx, sb, 10*time.Second)
		if !ran || err == nil || !strings.Contains(err.Error(), "status 3") || !strings.Contains(res.Output, "lint failed") {
			t.Fatalf("pre-commit: ran=%v err=%v res=%+v", ran, err, res)
		}
		sb.WriteFile(ctx, ".openhands/setup.sh", []byte("sleep 60\n"), 0o644)
		ran, _, err = sandbox.RunSetup(ctx, sb, 500*time.Millisecond)
		if !ran || err == nil || !strings.Contains(err.Error(), "did not finish") {
			t.Fatalf("slow setup: ran=%v err=%v", ran, err)
		}
		if res := run(t, sb, "echo usable"); res.Output != "usable\n" {
			t.Errorf("shell after slow setup: %+v", res)
		}
	})
}

func TestWallClockLimit(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		sb := start(t, sandbox.Spec{WallClock: 1500 * time.Millisecond})
		run(t, sb, "true")
		begin := time.Now()
		_, err := sb.Exec(context.Background(), sandbox.Command{Command: "sleep 60", Timeout: time.Minute})
		if !errors.Is(err, sandbox.ErrWallClock) || !strings.Contains(err.Error(), "wall-clock limit") {
			t.Fatalf("err = %v, want the wall-clock error", err)
		}
		if el := time.Since(begin); el > 10*time.Second {
			t.Errorf("took %s to stop at the wall clock", el)
		}
		if _, err := sb.Exec(context.Background(), sandbox.Command{Command: "true"}); !errors.Is(err, sandbox.ErrWallClock) {
			t.Errorf("exec after the wall clock: err = %v", err)
		}
	})
}
