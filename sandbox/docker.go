package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// Labels gohands puts on every container it starts.
const (
	LabelJob      = "gohands.job"
	LabelInstance = "gohands.instance"
)

// BuildImageCommand is the command that builds the default sandbox image.
const BuildImageCommand = "deploy/sandbox/build.sh"

// closeTimeout bounds the removal of a container in Close and Reap.
const closeTimeout = 30 * time.Second

// ErrWallClock is returned by Exec once the sandbox's wall-clock limit has
// been reached and the sandbox killed.
var ErrWallClock = errors.New("the sandbox's wall-clock limit was reached")

// DockerOptions configures the docker driver.
type DockerOptions struct {
	// Instance identifies this gohands instance in container labels, so that
	// Reap removes only what this instance left behind.
	Instance string
	// Logger receives the driver's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// Docker is the driver that runs each sandbox in its own container through
// the Docker Engine API.
type Docker struct {
	cli      *client.Client
	instance string
	log      *slog.Logger
}

var _ Driver = (*Docker)(nil)

// NewDocker connects to the Docker engine named by the environment
// (DOCKER_HOST etc.), negotiating the API version, and checks that it answers.
func NewDocker(ctx context.Context, opt DockerOptions) (*Docker, error) {
	if opt.Instance == "" {
		return nil, errors.New("docker sandbox: DockerOptions.Instance is empty")
	}
	if !labelValueRe.MatchString(opt.Instance) {
		return nil, fmt.Errorf("docker sandbox: instance %q: use letters, digits, '.', '_' and '-'", opt.Instance)
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker sandbox: client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker sandbox: no Docker engine answers at %s (start dockerd, or use sandbox.driver: process): %w", cli.DaemonHost(), err)
	}
	cli.NegotiateAPIVersion(ctx)
	return &Docker{cli: cli, instance: opt.Instance, log: log}, nil
}

var labelValueRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Name returns "docker".
func (d *Docker) Name() string { return "docker" }

// Instance returns the instance id the driver labels its containers with.
func (d *Docker) Instance() string { return d.instance }

// Client returns the Docker API client, for tools and tests that need the
// engine directly.
func (d *Docker) Client() *client.Client { return d.cli }

// Close releases the connection to the engine; running sandboxes are not
// affected.
func (d *Docker) Close() error { return d.cli.Close() }

// CheckImage returns an error naming the build command when image does not
// exist in the engine.
func (d *Docker) CheckImage(ctx context.Context, image string) error {
	if image == "" {
		return errors.New("sandbox image name is empty")
	}
	if _, err := d.cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("sandbox image %q does not exist: build it with %s", image, BuildImageCommand)
		}
		return fmt.Errorf("inspect sandbox image %q: %w", image, err)
	}
	return nil
}

// Reap removes the containers a previous run of this instance left behind.
func (d *Docker) Reap(ctx context.Context) (int, error) {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelInstance+"="+d.instance)),
	})
	if err != nil {
		return 0, fmt.Errorf("list leftover sandboxes: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	n := 0
	var errs []error
	for _, c := range list {
		err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID[:12], err))
			continue
		}
		n++
		d.log.Info("removed leftover sandbox", "container", c.ID[:12], "job", c.Labels[LabelJob])
	}
	return n, errors.Join(errs...)
}

// Start creates and starts a container for spec, with the persistent shell
// ready in the workspace.
func (d *Docker) Start(ctx context.Context, spec Spec) (Sandbox, error) {
	workDir := spec.WorkDir
	if workDir == "" {
		workDir = DefaultWorkDir
	}
	if !path.IsAbs(workDir) {
		return nil, fmt.Errorf("sandbox: WorkDir %q is not an absolute path", workDir)
	}
	network := spec.Network
	switch network {
	case "":
		network = "bridge"
	case "bridge", "none":
	default:
		return nil, fmt.Errorf("sandbox: network %q: use bridge or none", spec.Network)
	}
	if spec.Image == "" {
		return nil, errors.New("sandbox: Spec.Image is empty")
	}
	if spec.CPUs < 0 || spec.MemoryBytes < 0 || spec.PidsLimit < 0 || spec.WallClock < 0 {
		return nil, errors.New("sandbox: CPUs, MemoryBytes, PidsLimit and WallClock must not be negative")
	}

	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelJob] = spec.JobID
	labels[LabelInstance] = d.instance

	res := container.Resources{NanoCPUs: int64(spec.CPUs * 1e9)}
	if spec.MemoryBytes > 0 {
		res.Memory = spec.MemoryBytes
		res.MemorySwap = spec.MemoryBytes // no swap
	}
	if spec.PidsLimit > 0 {
		res.PidsLimit = &spec.PidsLimit
	}
	init := true
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: []string{"sleep", "infinity"},
		Env:        envList(spec.Env, "/root"),
		WorkingDir: workDir,
		Labels:     labels,
		Hostname:   "sandbox",
	}
	hcfg := &container.HostConfig{
		NetworkMode: container.NetworkMode(network),
		Resources:   res,
		Init:        &init,
		SecurityOpt: []string{"no-new-privileges"},
	}
	name := "gohands-" + sanitizeName(spec.JobID) + "-" + randomHex(4)
	created, err := d.cli.ContainerCreate(ctx, cfg, hcfg, nil, nil, name)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("sandbox image %q does not exist: build it with %s: %w", spec.Image, BuildImageCommand, err)
		}
		return nil, fmt.Errorf("create sandbox container: %w", err)
	}
	sb := &dockerSandbox{d: d, id: created.ID, workDir: workDir, wallClock: spec.WallClock, dead: make(chan struct{})}
	log := d.log.With("container", created.ID[:12], "job", spec.JobID)
	sb.log = log
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		sb.Close(ctx)
		return nil, fmt.Errorf("start sandbox container: %w", err)
	}
	if spec.WallClock > 0 {
		sb.timer = time.AfterFunc(spec.WallClock, sb.expire)
	}
	sb.shell = newShell(sb.startShell, workDir, spec.MaxOutput)
	if err := sb.shell.open(ctx); err != nil {
		sb.Close(ctx)
		return nil, err
	}
	log.Info("sandbox started", "image", spec.Image, "network", network)
	return sb, nil
}

// envList turns env into KEY=value pairs, adding PATH and HOME when missing.
func envList(env map[string]string, home string) []string {
	out := make([]string, 0, len(env)+2)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	if _, ok := env["PATH"]; !ok {
		out = append(out, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if _, ok := env["HOME"]; !ok {
		out = append(out, "HOME="+home)
	}
	return out
}

var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func sanitizeName(s string) string {
	s = nameUnsafe.ReplaceAllString(s, "-")
	if len(s) > 40 {
		s = s[:40]
	}
	if s == "" || s[0] == '.' || s[0] == '-' {
		s = "job" + s
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// dockerSandbox is one container.
type dockerSandbox struct {
	d         *Docker
	id        string
	workDir   string
	wallClock time.Duration
	log       *slog.Logger
	shell     *shell
	timer     *time.Timer

	closeOnce sync.Once
	closeErr  error
	deadOnce  sync.Once
	dead      chan struct{} // closed when the wall clock expired
}

var _ Sandbox = (*dockerSandbox)(nil)

// ID returns the container id, for logs.
func (s *dockerSandbox) ID() string { return s.id }

func (s *dockerSandbox) WorkDir() string { return s.workDir }

func (s *dockerSandbox) Isolated() bool { return true }

// expire kills the container when the wall clock runs out.
func (s *dockerSandbox) expire() {
	s.deadOnce.Do(func() { close(s.dead) })
	s.log.Warn("sandbox wall-clock limit reached; killing it", "limit", s.wallClock)
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := s.d.cli.ContainerKill(ctx, s.id, "KILL"); err != nil && !cerrdefs.IsNotFound(err) {
		s.log.Error("kill sandbox after wall-clock limit", "err", err)
	}
}

func (s *dockerSandbox) expired() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

func (s *dockerSandbox) wallErr() error {
	return fmt.Errorf("%w (%s)", ErrWallClock, s.wallClock)
}

// bound returns ctx cancelled when the wall clock expires.
func (s *dockerSandbox) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.dead:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (s *dockerSandbox) Exec(ctx context.Context, cmd Command) (Result, error) {
	if s.expired() {
		return Result{ExitCode: -1}, s.wallErr()
	}
	bctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.shell.exec(bctx, cmd)
	if s.expired() {
		res.ExitCode = -1
		return res, s.wallErr()
	}
	if err != nil {
		return res, fmt.Errorf("exec: %w", err)
	}
	return res, nil
}

// startShell starts the shell as a docker exec attached to a terminal.
func (s *dockerSandbox) startShell(ctx context.Context) (shellConn, error) {
	script := `if command -v bash >/dev/null 2>&1; then exec bash --norc --noprofile --noediting -i; else exec sh -i; fi`
	ex, err := s.d.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd:          []string{"/bin/sh", "-c", script},
		Tty:          true,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   s.workDir,
	})
	if err != nil {
		return nil, fmt.Errorf("create shell exec: %w", err)
	}
	hj, err := s.d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{Tty: true})
	if err != nil {
		return nil, fmt.Errorf("attach shell exec: %w", err)
	}
	// A wide terminal, so that programs which ask do not wrap lines.
	_ = s.d.cli.ContainerExecResize(ctx, ex.ID, container.ResizeOptions{Height: 50, Width: 250})
	return &dockerConn{sb: s, hj: hj, doneCh: make(chan struct{})}, nil
}

// dockerConn is the hijacked stream of the shell's exec.
type dockerConn struct {
	sb     *dockerSandbox
	hj     types.HijackedResponse
	once   sync.Once
	doneCh chan struct{}
}

func (c *dockerConn) Read(p []byte) (int, error)  { return c.hj.Reader.Read(p) }
func (c *dockerConn) Write(p []byte) (int, error) { return c.hj.Conn.Write(p) }
func (c *dockerConn) done() <-chan struct{}       { return c.doneCh }

func (c *dockerConn) close() error {
	c.once.Do(func() {
		close(c.doneCh)
		c.hj.Close()
	})
	return nil
}

// killForegroundScript kills the terminal's foreground process group of the
// shell whose pid is $1, unless that group is the shell itself.
const killForegroundScript = `read -r l < /proc/$1/stat || exit 2; set -- $1 ${l##*) }; ` +
	`[ "$7" -gt 1 ] && [ "$7" != "$1" ] || exit 1; kill -KILL -"$7" || exit 1`

// killSessionScript kills every process whose session is $1 (the shell's),
// then the shell.
const killSessionScript = `sid=$1; for d in /proc/[0-9]*; do read -r l < "$d/stat" 2>/dev/null || continue; ` +
	`set -- ${l##*) }; [ "$4" = "$sid" ] && kill -KILL "${d#/proc/}" 2>/dev/null; done; kill -KILL "$sid" 2>/dev/null; exit 0`

// killSession ends the shell and everything it started, in the background
// too: a reset must not leave a busy loop or a server behind.
func (c *dockerConn) killSession(ctx context.Context, shellPid int) {
	c.sb.execOnce(ctx, []string{"/bin/sh", "-c", killSessionScript, "sh", strconv.Itoa(shellPid)}, nil)
}

func (c *dockerConn) killForeground(ctx context.Context, shellPid int) (bool, error) {
	_, code, err := c.sb.execOnce(ctx, []string{"/bin/sh", "-c", killForegroundScript, "sh", strconv.Itoa(shellPid)}, nil)
	if err != nil {
		return false, err
	}
	return code == 0, nil
}

func (c *dockerConn) readsTerminal(ctx context.Context, shellPid int) (int, error) {
	_, code, err := c.sb.execOnce(ctx, []string{"/bin/sh", "-c", readsTerminalScript, "sh", strconv.Itoa(shellPid)}, nil)
	return code, err
}

// execOnce runs argv in a one-off docker exec (not the persistent shell) and
// returns its combined output and exit code.
func (s *dockerSandbox) execOnce(ctx context.Context, argv []string, stdin io.Reader) ([]byte, int, error) {
	ex, err := s.d.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd:          argv,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   s.workDir,
	})
	if err != nil {
		return nil, -1, fmt.Errorf("create exec: %w", err)
	}
	hj, err := s.d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, -1, fmt.Errorf("attach exec: %w", err)
	}
	defer hj.Close()
	if stdin != nil {
		go func() {
			io.Copy(hj.Conn, stdin)
			hj.CloseWrite()
		}()
	}
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&out, &out, hj.Reader)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		hj.Close()
		<-done
		return out.Bytes(), -1, ctx.Err()
	}
	if err != nil {
		return out.Bytes(), -1, fmt.Errorf("read exec output: %w", err)
	}
	insp, err := s.d.cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return out.Bytes(), -1, fmt.Errorf("inspect exec: %w", err)
	}
	return out.Bytes(), insp.ExitCode, nil
}

// ExecOnce runs argv in a fresh `docker exec`, outside the persistent shell;
// it exists to compare the two, and for tools that need a clean process.
func (s *dockerSandbox) ExecOnce(ctx context.Context, argv ...string) ([]byte, int, error) {
	return s.execOnce(ctx, argv, nil)
}

func (s *dockerSandbox) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(s.workDir, p)
}

func (s *dockerSandbox) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if s.expired() {
		return nil, s.wallErr()
	}
	p := s.abs(name)
	for range 16 {
		rc, _, err := s.d.cli.CopyFromContainer(ctx, s.id, p)
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return nil, fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
			}
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		tr := tar.NewReader(rc)
		hdr, err := tr.Next()
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if hdr.Size > MaxReadFile {
				rc.Close()
				return nil, fmt.Errorf("read %s: %w", p, tooLarge(hdr.Size))
			}
			data, err := io.ReadAll(tr)
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			return data, nil
		case tar.TypeSymlink:
			rc.Close()
			if path.IsAbs(hdr.Linkname) {
				p = path.Clean(hdr.Linkname)
			} else {
				p = path.Join(path.Dir(p), hdr.Linkname)
			}
		case tar.TypeDir:
			rc.Close()
			return nil, fmt.Errorf("read %s: is a directory", p)
		default:
			rc.Close()
			return nil, fmt.Errorf("read %s: not a regular file", p)
		}
	}
	return nil, fmt.Errorf("read %s: too many levels of symbolic links", name)
}

// resolveLinks follows p while it is a symbolic link, as writing through
// the link would; a path that does not exist is returned as it is.
func (s *dockerSandbox) resolveLinks(ctx context.Context, p string) (string, error) {
	for range 16 {
		st, err := s.d.cli.ContainerStatPath(ctx, s.id, p)
		if err != nil || st.Mode&fs.ModeSymlink == 0 {
			return p, nil
		}
		if path.IsAbs(st.LinkTarget) {
			p = path.Clean(st.LinkTarget)
		} else {
			p = path.Join(path.Dir(p), st.LinkTarget)
		}
	}
	return "", errors.New("too many levels of symbolic links")
}

func (s *dockerSandbox) WriteFile(ctx context.Context, name string, data []byte, mode fs.FileMode) error {
	if s.expired() {
		return s.wallErr()
	}
	p, err := s.resolveLinks(ctx, s.abs(name))
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	dir, base := path.Split(p)
	if base == "" {
		return fmt.Errorf("write %s: no file name", name)
	}
	if _, err := s.d.cli.ContainerStatPath(ctx, s.id, dir); err != nil {
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("write %s: %w", p, err)
		}
		out, code, err := s.execOnce(ctx, []string{"mkdir", "-p", "--", dir}, nil)
		if err != nil {
			return fmt.Errorf("write %s: mkdir %s: %w", p, dir, err)
		}
		if code != 0 {
			return fmt.Errorf("write %s: mkdir %s: exit %d: %s", p, dir, code, bytes.TrimSpace(out))
		}
	}
	if mode == 0 {
		mode = 0o644
		if st, err := s.d.cli.ContainerStatPath(ctx, s.id, p); err == nil && st.Mode.IsRegular() {
			mode = st.Mode.Perm()
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: base, Mode: int64(mode.Perm()), Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Now(), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	tw.Write(data)
	tw.Close()
	if err := s.d.cli.CopyToContainer(ctx, s.id, dir, &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func (s *dockerSandbox) CopyIn(ctx context.Context, src string) error {
	if s.expired() {
		return s.wallErr()
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, src)) }()
	err := s.d.cli.CopyToContainer(ctx, s.id, s.workDir, pr, container.CopyToContainerOptions{})
	pr.CloseWithError(errors.New("copy aborted"))
	if err != nil {
		return fmt.Errorf("copy %s into the sandbox: %w", src, err)
	}
	return nil
}

func (s *dockerSandbox) CopyOut(ctx context.Context, dst string) error {
	if s.expired() {
		return s.wallErr()
	}
	rc, _, err := s.d.cli.CopyFromContainer(ctx, s.id, s.workDir)
	if err != nil {
		return fmt.Errorf("copy the workspace out: %w", err)
	}
	defer rc.Close()
	if err := extractTar(rc, dst, extractOptions{stripFirst: true, keepGit: true, mirror: true}); err != nil {
		return fmt.Errorf("copy the workspace out to %s: %w", dst, err)
	}
	return nil
}

// Close removes the container. It works with a cancelled ctx and is safe to
// call more than once.
func (s *dockerSandbox) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.shell != nil {
			s.shell.close()
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		err := s.d.cli.ContainerRemove(ctx, s.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			s.closeErr = fmt.Errorf("remove sandbox container %s: %w", s.id[:12], err)
			return
		}
		s.log.Info("sandbox removed")
	})
	return s.closeErr
}
