package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions configures the process driver.
type ProcessOptions struct {
	// Instance identifies this gohands instance in the names of the
	// sandboxes' temporary directories, so that Reap removes only its own.
	Instance string
	// BaseDir holds the sandboxes' directories; os.TempDir() when empty.
	BaseDir string
	// Logger receives the driver's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// Process is the driver that runs commands directly on the host, each
// sandbox in its own temporary directory. It isolates nothing: it is for
// development and for machines without Docker. Its shell gets only
// Spec.Env (plus PATH and HOME), never the host's environment.
type Process struct {
	instance string
	base     string
	log      *slog.Logger
}

var _ Driver = (*Process)(nil)

// NewProcess returns the process driver, warning in the log that it does
// not isolate anything.
func NewProcess(opt ProcessOptions) (*Process, error) {
	if opt.Instance == "" || !labelValueRe.MatchString(opt.Instance) {
		return nil, fmt.Errorf("process sandbox: instance %q: use letters, digits, '.', '_' and '-'", opt.Instance)
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	base := opt.BaseDir
	if base == "" {
		base = os.TempDir()
	}
	log.Warn("sandbox driver 'process' runs the agent's commands on this host with NO isolation; use it only for development")
	return &Process{instance: opt.Instance, base: base, log: log}, nil
}

// Name returns "process".
func (p *Process) Name() string { return "process" }

// prefix names the sandboxes' directories: Reap removes what matches it, so
// it says "sandbox" lest it match anything else of gohands' in the same place.
func (p *Process) prefix() string { return "gohands-sandbox-" + p.instance + "-" }

// Start makes a temporary directory with the workspace and a home, and
// starts the shell there. Spec.Image, Network, CPUs, MemoryBytes and
// PidsLimit are ignored; WallClock is enforced.
func (p *Process) Start(ctx context.Context, spec Spec) (Sandbox, error) {
	if spec.WallClock < 0 {
		return nil, errors.New("sandbox: WallClock must not be negative")
	}
	dir, err := os.MkdirTemp(p.base, p.prefix()+sanitizeName(spec.JobID)+"-")
	if err != nil {
		return nil, fmt.Errorf("process sandbox: %w", err)
	}
	work := filepath.Join(dir, "workspace")
	home := filepath.Join(dir, "home")
	for _, d := range []string{work, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("process sandbox: %w", err)
		}
	}
	log := p.log.With("dir", dir, "job", spec.JobID)
	log.Warn("process sandbox started: commands run on the host without isolation")
	sb := &processSandbox{dir: dir, workDir: work, env: envList(spec.Env, home), wallClock: spec.WallClock, log: log, dead: make(chan struct{})}
	sb.shell = newShell(sb.startShell, work, spec.MaxOutput)
	if err := sb.shell.open(ctx); err != nil {
		sb.Close(ctx)
		return nil, err
	}
	if spec.WallClock > 0 {
		sb.timer = time.AfterFunc(spec.WallClock, sb.expire)
	}
	return sb, nil
}

// Reap removes the directories (and kills the shells) of sandboxes an
// earlier run of this instance left behind.
func (p *Process) Reap(ctx context.Context) (int, error) {
	dirs, err := filepath.Glob(filepath.Join(p.base, p.prefix()+"*"))
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, dir := range dirs {
		if b, err := os.ReadFile(filepath.Join(dir, "shell.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && strings.HasPrefix(cwd, dir) {
					killSession(pid)
				}
			}
		}
		if err := removeTree(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

type processSandbox struct {
	dir, workDir string
	env          []string
	wallClock    time.Duration
	log          *slog.Logger
	shell        *shell
	timer        *time.Timer

	closeOnce sync.Once
	closeErr  error
	deadOnce  sync.Once
	dead      chan struct{}
}

var _ Sandbox = (*processSandbox)(nil)

func (s *processSandbox) WorkDir() string { return s.workDir }

// Isolated is false: commands run on the host.
func (s *processSandbox) Isolated() bool { return false }

func (s *processSandbox) startShell(ctx context.Context) (shellConn, error) {
	master, slave, err := openPty()
	if err != nil {
		return nil, err
	}
	defer slave.Close()
	bin, args := "/bin/sh", []string{"-i"}
	if b, err := exec.LookPath("bash"); err == nil {
		bin, args = b, []string{"--norc", "--noprofile", "--noediting", "-i"}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.workDir
	cmd.Env = append(s.env, "TERM=dumb")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	os.WriteFile(filepath.Join(s.dir, "shell.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	c := &processConn{f: master, cmd: cmd, doneCh: make(chan struct{}), exited: make(chan struct{})}
	go func() { cmd.Wait(); close(c.exited) }()
	return c, nil
}

// processConn is the pty master of a host shell.
type processConn struct {
	f      *os.File
	cmd    *exec.Cmd
	once   sync.Once
	doneCh chan struct{}
	exited chan struct{}
}

func (c *processConn) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	if err != nil && errors.Is(err, syscall.EIO) {
		err = io.EOF // the shell and everything on its terminal are gone
	}
	return n, err
}
func (c *processConn) Write(p []byte) (int, error) { return c.f.Write(p) }
func (c *processConn) done() <-chan struct{}       { return c.doneCh }

func (c *processConn) killForeground(ctx context.Context, shellPid int) (bool, error) {
	tpgid, err := statField(shellPid, 8)
	if err != nil {
		return false, err
	}
	if tpgid <= 1 || tpgid == shellPid {
		return false, nil
	}
	return syscall.Kill(-tpgid, syscall.SIGKILL) == nil, nil
}

func (c *processConn) readsTerminal(ctx context.Context, shellPid int) (int, error) {
	err := exec.CommandContext(ctx, "/bin/sh", "-c", readsTerminalScript, "sh", strconv.Itoa(shellPid)).Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

func (c *processConn) close() error {
	c.once.Do(func() {
		close(c.doneCh)
		killSession(c.cmd.Process.Pid)
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
		}
		c.f.Close()
	})
	return nil
}

// statField returns field n (1-based, as in proc(5)) of /proc/pid/stat,
// for the numeric fields after the command name.
func statField(pid, n int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if n-3 < 0 || n-3 >= len(f) {
		return 0, fmt.Errorf("no field %d in /proc/%d/stat", n, pid)
	}
	return strconv.Atoi(f[n-3])
}

// killSession kills every process in the session led by sid: the shell,
// its jobs and their background children.
func killSession(sid int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := statField(pid, 6); err == nil && s == sid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	syscall.Kill(sid, syscall.SIGKILL)
}

func (s *processSandbox) expire() {
	s.deadOnce.Do(func() { close(s.dead) })
	s.log.Warn("sandbox wall-clock limit reached; killing its shell", "limit", s.wallClock)
	s.shell.close()
}

func (s *processSandbox) expired() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

func (s *processSandbox) wallErr() error { return fmt.Errorf("%w (%s)", ErrWallClock, s.wallClock) }

func (s *processSandbox) Exec(ctx context.Context, cmd Command) (Result, error) {
	if s.expired() {
		return Result{ExitCode: -1}, s.wallErr()
	}
	res, err := s.shell.exec(ctx, cmd)
	if s.expired() {
		res.ExitCode = -1
		return res, s.wallErr()
	}
	if err != nil {
		return res, fmt.Errorf("exec: %w", err)
	}
	return res, nil
}

func (s *processSandbox) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(s.workDir, p)
}

func (s *processSandbox) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if fi, err := os.Stat(s.abs(name)); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxReadFile {
		return nil, fmt.Errorf("read %s: %w", name, tooLarge(fi.Size()))
	}
	b, err := os.ReadFile(s.abs(name))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

func (s *processSandbox) WriteFile(ctx context.Context, name string, data []byte, mode fs.FileMode) error {
	p := s.abs(name)
	if mode == 0 {
		mode = 0o644
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			mode = fi.Mode().Perm()
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.WriteFile(p, data, mode.Perm()); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Chmod(p, mode.Perm()); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// copyTree streams src into dst through the same archive code the docker
// driver uses, so both drivers carry files the same way.
func copyTree(src, dst string, opt extractOptions) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, src)) }()
	err := extractTar(pr, dst, opt)
	pr.CloseWithError(errors.New("copy aborted"))
	return err
}

func (s *processSandbox) CopyIn(ctx context.Context, src string) error {
	if err := copyTree(src, s.workDir, extractOptions{}); err != nil {
		return fmt.Errorf("copy %s into the sandbox: %w", src, err)
	}
	return nil
}

func (s *processSandbox) CopyOut(ctx context.Context, dst string) error {
	if err := copyTree(s.workDir, dst, extractOptions{keepGit: true, mirror: true}); err != nil {
		return fmt.Errorf("copy the workspace out to %s: %w", dst, err)
	}
	return nil
}

// Close kills the shell and everything it started, and removes the
// directory. It is safe to call twice.
func (s *processSandbox) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.timer != nil {
			s.timer.Stop()
		}
		s.shell.close()
		if err := removeTree(s.dir); err != nil {
			s.closeErr = err
			return
		}
		s.log.Info("process sandbox removed")
	})
	return s.closeErr
}

// removeTree removes dir, making read-only directories writable first.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove sandbox directory: %w", err)
	}
	return nil
}
