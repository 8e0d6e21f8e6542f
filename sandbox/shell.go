package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The persistent shell protocol, shared by both drivers.
//
// The shell (bash, or sh when the image has none) runs interactively on a
// terminal, so that Ctrl-C reaches the foreground job and job control keeps
// background jobs out of the way. Its prompt is the marker: whenever the
// shell is ready for a command it prints, through PS1, the sequence number of
// the last command, its exit code, the shell's pid and the working
// directory. Each command is sent as one `__gh_seq=N; eval '<quoted text>'`
// unit: eval keeps cd and export in the current shell, a syntax error in the
// text cannot leave the shell waiting for more, and a command that reads
// input reads the next line written to the terminal (an is_input call).
// Because the prompt is printed however the command ended (Ctrl-C included),
// the marker always arrives once the shell is back.

// markerRe matches the prompt: RS "GHM" seq SP code SP pid SP cwd RS.
var markerRe = regexp.MustCompile("\n?\x1eGHM([0-9]+) (-?[0-9]+) ([0-9]+) ([^\x1e\n]*)\x1e")

// markerWindow is how many trailing bytes are held back from the output
// while waiting for a marker that may be split across reads.
const markerWindow = 8192

// ttyChunk bounds each line written to the terminal, well under the
// canonical-mode line limit of 4096 bytes.
const ttyChunk = 1024

// shellInit prepares the interactive shell: no echo, no CR before LF, no
// history expansion, and the marker as the prompt. The prompt that follows
// it carries sequence 0.
const shellInit = `stty -echo -onlcr 2>/dev/null; unset PROMPT_COMMAND HISTFILE; [ -n "$BASH_VERSION" ] && set +H; ` +
	`__gh_m() { printf '\n\036GHM%s %s %s %s\036' "$1" "$2" "$$" "$PWD"; }; ` +
	`PS2=''; PS4='+ '; cd @WORKDIR@; __gh_seq=0; PS1='$(__gh_m "$__gh_seq" "$?")'` + "\n"

// shellConn is the terminal of a running shell, as a driver provides it.
type shellConn interface {
	io.ReadWriter
	// interrupt kills the foreground job of the shell whose pid is given,
	// used when Ctrl-C did not end it; it reports whether it killed anything.
	killForeground(ctx context.Context, shellPid int) (bool, error)
	// readsTerminal runs readsTerminalScript for the shell whose pid is
	// given and returns its exit code.
	readsTerminal(ctx context.Context, shellPid int) (int, error)
	// close ends the shell and releases the terminal.
	close() error
	// done is closed by close.
	done() <-chan struct{}
}

// sessionKiller is a shellConn that can kill every process of the shell's
// session, which closing its terminal does not.
type sessionKiller interface {
	killSession(ctx context.Context, shellPid int)
}

// shellStarter starts a fresh shell in workDir; drivers implement it.
type shellStarter func(ctx context.Context) (shellConn, error)

// shell is the persistent shell of one sandbox.
type shell struct {
	start     shellStarter
	workDir   string
	maxOutput int

	mu   sync.Mutex // serializes Exec calls
	conn shellConn

	liveMu sync.Mutex // guards live and closed, for close during an Exec
	live   shellConn
	closed bool

	pid     int
	chunks  chan []byte
	readErr chan error
	pending []byte // bytes read but not yet given to a command
	seq     int
	running bool // a command is still running after its last Exec returned
	cwd     string
	code    int // exit code reported by the last resync
}

func newShell(start shellStarter, workDir string, maxOutput int) *shell {
	if maxOutput <= 0 {
		maxOutput = DefaultMaxOutput
	}
	return &shell{start: start, workDir: workDir, maxOutput: maxOutput, cwd: workDir}
}

// open starts the shell and waits until it is ready.
func (s *shell) open(ctx context.Context) error {
	conn, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("start shell: %w", err)
	}
	s.liveMu.Lock()
	if s.closed {
		s.liveMu.Unlock()
		conn.close()
		return errors.New("the sandbox is closed")
	}
	s.live = conn
	s.liveMu.Unlock()
	s.conn = conn
	s.chunks = make(chan []byte, 64)
	s.readErr = make(chan error, 1)
	s.pending = nil
	s.seq = 0
	s.running = false
	go readLoop(conn, s.chunks, s.readErr, conn.done())

	if _, err := io.WriteString(conn, strings.Replace(shellInit, "@WORKDIR@", shellQuote(s.workDir), 1)); err != nil {
		conn.close()
		return fmt.Errorf("initialize shell: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var discard capper
	discard.max = 4096
	m, err := s.waitMarker(ctx, 0, &discard)
	if err != nil {
		conn.close()
		return fmt.Errorf("initialize shell: %w (output: %q)", err, discard.String())
	}
	s.pid = m.pid
	s.cwd = m.cwd
	return nil
}

// readLoop copies the terminal's output into chunks until it fails.
// It stops when done is closed, so that it never outlives its shell.
func readLoop(r io.Reader, chunks chan<- []byte, errc chan<- error, done <-chan struct{}) {
	for {
		buf := make([]byte, 32*1024)
		n, err := r.Read(buf)
		if n > 0 {
			select {
			case chunks <- buf[:n]:
			case <-done:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errShellExited
			}
			errc <- err
			close(chunks)
			return
		}
	}
}

var errShellExited = errors.New("the shell exited")

type marker struct {
	seq, code, pid int
	cwd            string
}

// errMarkerTimeout is returned by waitMarker when ctx's deadline passes.
var errMarkerTimeout = errors.New("timed out waiting for the shell")

// waitMarker feeds output into out until the marker with sequence seq
// arrives. Markers of earlier sequences (left by interrupted commands) are
// dropped.
func (s *shell) waitMarker(ctx context.Context, seq int, out *capper) (marker, error) {
	for {
		for bytes.IndexByte(s.pending, '\x1e') >= 0 {
			loc := markerRe.FindSubmatchIndex(s.pending)
			if loc == nil {
				break
			}
			out.Write(s.pending[:loc[0]])
			got, _ := strconv.Atoi(string(s.pending[loc[2]:loc[3]]))
			code, _ := strconv.Atoi(string(s.pending[loc[4]:loc[5]]))
			pid, _ := strconv.Atoi(string(s.pending[loc[6]:loc[7]]))
			cwd := string(s.pending[loc[8]:loc[9]])
			s.pending = append([]byte(nil), s.pending[loc[1]:]...)
			if got == seq {
				return marker{seq: got, code: code, pid: pid, cwd: cwd}, nil
			}
		}
		if n := len(s.pending) - markerWindow; n > 0 {
			out.Write(s.pending[:n])
			s.pending = append([]byte(nil), s.pending[n:]...)
		}
		select {
		case b, ok := <-s.chunks:
			if !ok {
				err := <-s.readErr
				s.readErr <- err
				return marker{}, err
			}
			s.pending = append(s.pending, b...)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return marker{}, errMarkerTimeout
			}
			return marker{}, ctx.Err()
		}
	}
}

// flushPending moves what is buffered (but not a partial marker's worth of
// bytes at the end) into out, so that a running command's output so far can
// be returned.
func (s *shell) flushPending(out *capper) {
	if loc := bytes.Index(s.pending, []byte("\x1eGHM")); loc >= 0 {
		out.Write(s.pending[:loc])
		s.pending = append([]byte(nil), s.pending[loc:]...)
		return
	}
	out.Write(s.pending)
	s.pending = nil
}

// exited reports whether the shell ended while no command was running.
func (s *shell) exited() bool {
	for {
		select {
		case b, ok := <-s.chunks:
			if !ok {
				return true
			}
			s.pending = append(s.pending, b...)
		default:
			return false
		}
	}
}

// keys maps the key names of the OpenHands terminal tool to bytes.
var keys = map[string]string{
	"C-c": "\x03", "C-d": "\x04", "C-z": "\x1a", "C-\\": "\x1c",
	"C-l": "\x0c", "C-u": "\x15", "C-a": "\x01", "C-e": "\x05",
	"Enter": "\n", "Tab": "\t", "Escape": "\x1b",
}

// exec runs one command. deadline bounds the whole call (the sandbox's wall
// clock); it is zero when there is none.
func (s *shell) exec(ctx context.Context, cmd Command) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cmd.Reset {
		if err := s.reset(ctx); err != nil {
			return Result{ExitCode: -1}, err
		}
		if strings.TrimSpace(cmd.Command) == "" {
			return Result{Output: "The shell was restarted.", ExitCode: 0, Cwd: s.cwd}, nil
		}
	}
	if s.conn == nil {
		return Result{ExitCode: -1}, errors.New("the shell is not running")
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	out := &capper{max: s.maxOutput}

	if cmd.IsInput {
		if !s.running {
			return Result{ExitCode: -1, Cwd: s.cwd}, errors.New("no command is running to send input to")
		}
		text, ok := keys[cmd.Command]
		if !ok {
			text = cmd.Command + "\n"
		}
		if _, err := io.WriteString(s.conn, text); err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("send input: %w", err)
		}
	} else {
		if s.running {
			// The agent moved on: end what still runs before starting anew.
			if err := s.interrupt(ctx, out); err != nil {
				return Result{ExitCode: -1}, err
			}
			out = &capper{max: s.maxOutput}
		}
		if strings.TrimSpace(cmd.Command) == "" {
			return Result{ExitCode: 0, Cwd: s.cwd}, nil
		}
		if s.exited() {
			// Busybox ash (the fallback without bash) can exit when a
			// background job ends while it waits at its prompt.
			if err := s.reset(ctx); err != nil {
				return Result{ExitCode: -1}, err
			}
			out.Write([]byte("[the shell had exited and was restarted: working directory and variables were reset]\n"))
		}
		s.seq++
		s.flushPending(out) // output of background jobs since the last call
		if _, err := io.WriteString(s.conn, wrapCommand(cmd.Command, s.seq)); err != nil {
			return Result{ExitCode: -1}, fmt.Errorf("send command: %w", err)
		}
	}

	wctx, cancel := context.WithTimeout(ctx, timeout)
	m, err := s.waitMarker(wctx, s.seq, out)
	cancel()
	if err != nil && ctx.Err() != nil {
		err = ctx.Err() // the caller gave up; that is not the command's timeout
	}
	switch {
	case err == nil:
		s.running = false
		s.cwd = m.cwd
		return Result{Output: out.String(), ExitCode: m.code, Cwd: m.cwd}, nil
	case errors.Is(err, errMarkerTimeout):
		s.flushPending(out)
		s.running = true
		if cmd.IsInput || s.waitingForInput(ctx, out) {
			// A program that printed a prompt, or one the agent is talking
			// to, is left running: the agent decides (more input, or C-c).
			return Result{Output: out.String(), ExitCode: -1, Running: true, Cwd: s.cwd}, nil
		}
		s.code = -1
		ierr := s.interrupt(ctx, out)
		s.flushPending(out)
		res := Result{Output: out.String() + fmt.Sprintf("\n[command timed out after %s and was interrupted]", timeout), ExitCode: s.code, TimedOut: true, Cwd: s.cwd}
		return res, ierr
	default:
		s.flushPending(out)
		if ctx.Err() != nil {
			// Cancelled by the caller: the command may still run; the next
			// command interrupts it first.
			s.running = true
		}
		return Result{Output: out.String(), ExitCode: -1, Running: s.running, Cwd: s.cwd}, err
	}
}

// readsTerminalScript exits 0 when a process of the terminal's foreground
// process group of the shell whose pid is $1 (the shell itself, for a
// builtin such as read) is blocked reading that terminal, 1 when none is,
// and 2 when the kernel does not say: a wait in poll or select, which may
// be for the terminal or for a socket, or a wchan the kernel hides. It
// reads only /proc, as the drivers' other scripts do, so that it runs with
// busybox.
const readsTerminalScript = `read -r l < "/proc/$1/stat" || exit 2; tty=$(readlink "/proc/$1/fd/0") || exit 2; ` +
	`set -- $1 ${l##*) }; fg=$7; [ "$fg" -gt 0 ] || exit 2; res=1; ` +
	`for d in /proc/[0-9]*; do read -r l < "$d/stat" 2>/dev/null || continue; set -- ${l##*) }; ` +
	`[ "$3" = "$fg" ] && [ "$1" = S ] || continue; [ "$(readlink "$d/fd/0" 2>/dev/null)" = "$tty" ] || continue; ` +
	`case "$(cat "$d/wchan" 2>/dev/null)" in n_tty_read|wait_woken) exit 0 ;; ` +
	`poll_schedule_timeout*|do_select|core_sys_select|do_sys_poll|''|0) res=2 ;; esac; done; exit $res`

// waitingForInput tells whether a command that ran out of time is waiting
// for the agent, and so is to be left running rather than interrupted: a
// process in the terminal's foreground is blocked reading the terminal.
// Where the kernel does not say, a command that printed an unfinished line
// (a prompt) and went quiet is taken to be waiting.
func (s *shell) waitingForInput(ctx context.Context, out *capper) bool {
	switch code, err := s.conn.readsTerminal(ctx, s.pid); {
	case err == nil && code == 0:
		return true
	case err == nil && code == 1:
		return false
	}
	tail := out.tail()
	return len(tail) > 0 && tail[len(tail)-1] != '\n'
}

// interrupt ends the running command: Ctrl-C, then SIGKILL to the
// foreground job, then a fresh shell. Output produced meanwhile goes to out.
func (s *shell) interrupt(ctx context.Context, out *capper) error {
	if _, err := io.WriteString(s.conn, "\x03"); err == nil {
		if s.settle(ctx, out, 2*time.Second) {
			return nil
		}
	}
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	killed, _ := s.conn.killForeground(kctx, s.pid)
	cancel()
	if !killed {
		// Nothing to kill: the shell itself runs the command (a loop of
		// builtins), and Ctrl-C is the only way short of a new shell that
		// keeps its state. On a loaded machine it can take longer.
		if _, err := io.WriteString(s.conn, "\x03"); err != nil {
			return s.reset(ctx)
		}
	}
	if s.settle(ctx, out, 3*time.Second) {
		return nil
	}
	return s.reset(ctx)
}

// settle waits for the prompt of the running command.
func (s *shell) settle(ctx context.Context, out *capper, wait time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := s.waitMarker(wctx, s.seq, out)
	if err != nil {
		return false
	}
	s.running = false
	s.cwd = m.cwd
	s.code = m.code
	return true
}

// reset replaces the shell with a fresh one.
func (s *shell) reset(ctx context.Context) error {
	if s.conn != nil {
		// Closing a terminal does not end what runs in it everywhere: a
		// driver that can kills the old shell's whole session first.
		if k, ok := s.conn.(sessionKiller); ok && s.pid > 0 {
			k.killSession(ctx, s.pid)
		}
		s.conn.close()
		s.conn = nil
	}
	return s.open(ctx)
}

// close ends the shell, also while a command runs; the shell cannot be
// opened again.
func (s *shell) close() {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.closed = true
	if s.live != nil {
		s.live.close()
	}
}

// wrapCommand builds the line that runs text: it sets the sequence number
// the next prompt reports, checks the text's syntax in a subshell (as the
// body of a function that is never called) and evals it in the shell itself
// only when it parses; otherwise it is evaluated in a subshell, which prints
// the syntax error without the interactive shell's jump back to its prompt
// (after which bash shows the previous prompt again, and the marker would
// be stale).
func wrapCommand(text string, seq int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "__gh_seq=%d; if (eval ", seq)
	writeQuoted(&b, "__gh_chk() {\n"+text+"\n}")
	b.WriteString(") 2>/dev/null; then eval ")
	writeQuoted(&b, text)
	b.WriteString("; else (eval ")
	writeQuoted(&b, text)
	b.WriteString("); fi\n")
	return b.String()
}

// writeQuoted writes text as one shell word made of single-quoted chunks
// joined by backslash-newline, so that no terminal line is long.
func writeQuoted(b *strings.Builder, text string) {
	if text == "" {
		b.WriteString("''")
		return
	}
	start, width := 0, 0
	for i := 0; i < len(text); i++ {
		width++
		if text[i] == '\'' {
			width += 3 // '\''
		}
		if width >= ttyChunk || i == len(text)-1 {
			b.WriteString(shellQuote(text[start : i+1]))
			if i < len(text)-1 {
				b.WriteString("\\\n")
			}
			start, width = i+1, 0
		}
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// capper keeps the head and the tail of a stream, counting what it cuts.
type capper struct {
	max  int
	head []byte
	ring []byte // tail, as a ring buffer once full
	pos  int
	full bool
	cut  int
}

func (c *capper) Write(p []byte) {
	half := c.max / 2
	if room := half - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	tailMax := c.max - half
	for len(p) > 0 {
		if !c.full {
			n := min(tailMax-len(c.ring), len(p))
			c.ring = append(c.ring, p[:n]...)
			p = p[n:]
			if len(c.ring) == tailMax {
				c.full = true
				c.pos = 0
			}
			continue
		}
		if tailMax == 0 {
			c.cut += len(p)
			return
		}
		n := min(tailMax-c.pos, len(p))
		copy(c.ring[c.pos:], p[:n])
		c.cut += n
		c.pos = (c.pos + n) % tailMax
		p = p[n:]
	}
}

// tail returns the last bytes written (the head when nothing was cut).
func (c *capper) tail() []byte {
	if !c.full {
		if len(c.ring) == 0 {
			return c.head
		}
		return c.ring
	}
	return append(append([]byte(nil), c.ring[c.pos:]...), c.ring[:c.pos]...)
}

// String returns the kept text, with a marker where bytes were cut.
func (c *capper) String() string {
	var b strings.Builder
	b.Write(c.head)
	if c.cut > 0 {
		fmt.Fprintf(&b, "\n[... %d characters cut ...]\n", c.cut)
	}
	if len(c.ring) > 0 {
		b.Write(c.tail())
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}
