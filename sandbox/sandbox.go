// Package sandbox runs an agent's commands in a throwaway environment: a Docker
// container by default, or a temporary directory on the host for development.
//
// The runner sees only the Sandbox interface; the drivers live in docker.go and
// process.go. Nothing in this package knows about GitHub, git or the model.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Defaults applied where a Spec or Command leaves a value zero.
const (
	DefaultWorkDir        = "/workspace"
	DefaultCommandTimeout = 120 * time.Second
	DefaultMaxOutput      = 30000
	// MaxReadFile is the largest file ReadFile returns: a bigger one would
	// be held whole in gohands' memory (the terminal reads it in parts).
	MaxReadFile = 16 << 20
)

// ErrTooLarge is returned by ReadFile for a file over MaxReadFile.
var ErrTooLarge = errors.New("file too large to read whole")

func tooLarge(size int64) error {
	return fmt.Errorf("%w: %d bytes, over %d MB; read parts of it in the terminal (head, sed -n, grep)", ErrTooLarge, size, MaxReadFile>>20)
}

// Spec describes the sandbox a job wants.
type Spec struct {
	// Image is the container image (docker driver only).
	Image string
	// Env is the complete environment given to commands inside; nothing of
	// the host's environment is passed unless it is named here.
	Env map[string]string
	// Network is "bridge" or "none".
	Network string
	// CPUs, MemoryBytes and PidsLimit bound the container; zero means no limit.
	CPUs        float64
	MemoryBytes int64
	PidsLimit   int64
	// WallClock bounds the sandbox's whole life; zero means no limit.
	WallClock time.Duration
	// Labels are added to the container, next to gohands' own labels.
	Labels map[string]string
	// JobID identifies the job in labels and names.
	JobID string
	// WorkDir is where the workspace lives inside; DefaultWorkDir when empty.
	WorkDir string
	// MaxOutput caps a command's output in characters; DefaultMaxOutput when zero.
	MaxOutput int
}

// Command is one call to the persistent shell. Its fields mirror the
// OpenHands terminal tool.
type Command struct {
	// Command is the shell text to run, or the text to send when IsInput is set.
	Command string
	// IsInput sends Command to the running process (e.g. "y", or a key such
	// as "C-c", "C-d", "C-z") instead of starting a new command.
	IsInput bool
	// Timeout overrides DefaultCommandTimeout for this call.
	Timeout time.Duration
	// Reset kills the shell and starts a fresh one.
	Reset bool
}

// Result is what a command produced.
type Result struct {
	// Output is stdout and stderr interleaved, capped (head and tail kept,
	// with a marker that says how much was cut).
	Output string
	// ExitCode is the command's exit status; -1 when it has not finished.
	ExitCode int
	// TimedOut reports that the command ran past its timeout and was interrupted.
	TimedOut bool
	// Running reports that the command is still running (waiting for input,
	// or not interrupted yet): the next call may send input with IsInput.
	Running bool
	// Cwd is the shell's working directory after the command.
	Cwd string
}

// Sandbox is one running sandbox. Paths are inside the sandbox; relative
// paths are relative to the workspace.
type Sandbox interface {
	// Exec runs a command in the persistent shell.
	Exec(ctx context.Context, cmd Command) (Result, error)
	// ReadFile reads a regular file, following symbolic links; a file over
	// MaxReadFile is refused with ErrTooLarge.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile writes a file, creating parent directories. Mode 0 keeps
	// an existing file's permissions (an edited script stays executable)
	// and makes a new file 0644.
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	// CopyIn copies the host directory src into the workspace.
	CopyIn(ctx context.Context, src string) error
	// CopyOut makes the host directory dst mirror the workspace: new and
	// changed files are written, files gone inside are deleted, modes and
	// symlinks are carried as they are, and nothing outside dst is touched.
	CopyOut(ctx context.Context, dst string) error
	// WorkDir is the workspace path inside the sandbox.
	WorkDir() string
	// Isolated reports whether the sandbox isolates commands from the host.
	Isolated() bool
	// Close stops and removes the sandbox. It is safe to call twice.
	Close(ctx context.Context) error
}

// Driver starts sandboxes.
type Driver interface {
	// Start starts a sandbox from spec.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
	// Reap removes sandboxes left behind by an earlier run of this gohands
	// instance (a crash), returning how many it removed.
	Reap(ctx context.Context) (int, error)
	// Name is "docker" or "process".
	Name() string
}
