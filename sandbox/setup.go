package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"
)

// Paths of the repository's own scripts, relative to the workspace.
const (
	SetupScript     = ".openhands/setup.sh"
	PreCommitScript = ".openhands/pre-commit.sh"
)

// DefaultScriptTimeout bounds setup.sh and pre-commit.sh when the caller
// gives no timeout.
const DefaultScriptTimeout = 10 * time.Minute

// RunSetup runs .openhands/setup.sh from the workspace when the repository
// has one. ran reports whether it exists; res holds its output for the job
// log; err is set when it failed or timed out (the caller still runs the
// agent).
func RunSetup(ctx context.Context, sb Sandbox, timeout time.Duration) (ran bool, res Result, err error) {
	return runScript(ctx, sb, SetupScript, timeout)
}

// RunPreCommit runs .openhands/pre-commit.sh from the workspace when the
// repository has one, like RunSetup.
func RunPreCommit(ctx context.Context, sb Sandbox, timeout time.Duration) (ran bool, res Result, err error) {
	return runScript(ctx, sb, PreCommitScript, timeout)
}

func runScript(ctx context.Context, sb Sandbox, script string, timeout time.Duration) (bool, Result, error) {
	if _, err := sb.ReadFile(ctx, script); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, Result{}, nil
		}
		return false, Result{}, fmt.Errorf("look for %s: %w", script, err)
	}
	if timeout <= 0 {
		timeout = DefaultScriptTimeout
	}
	p := path.Join(sb.WorkDir(), script)
	// A subshell: the script's `exit` or `cd` must not end or move the
	// agent's shell.
	cmd := fmt.Sprintf("(cd %s && if command -v bash >/dev/null 2>&1; then bash %s; else sh %s; fi) </dev/null",
		shellQuote(sb.WorkDir()), shellQuote(p), shellQuote(p))
	res, err := sb.Exec(ctx, Command{Command: cmd, Timeout: timeout})
	if err != nil {
		return true, res, fmt.Errorf("run %s: %w", script, err)
	}
	if res.Running {
		// Stdin is /dev/null, so this is a prompt that cannot be answered.
		ires, _ := sb.Exec(ctx, Command{Command: "C-c", IsInput: true, Timeout: 5 * time.Second})
		res.Output += ires.Output
		res.Running, res.TimedOut = false, true
	}
	switch {
	case res.TimedOut:
		return true, res, fmt.Errorf("%s did not finish within %s", script, timeout)
	case res.ExitCode != 0:
		return true, res, fmt.Errorf("%s exited with status %d", script, res.ExitCode)
	}
	return true, res, nil
}
