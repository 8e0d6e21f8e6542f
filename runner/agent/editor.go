package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/gohands/gohands/sandbox"
)

// snippetLines is how many lines around an edit are shown after it.
const snippetLines = 4

// maxUndo bounds the undo history kept per file.
const maxUndo = 10

// editor implements the file_editor tool on a sandbox, with OpenHands'
// semantics and messages. Paths must be absolute, as in OpenHands.
type editor struct {
	sb      sandbox.Sandbox
	history map[string][]string
	// busy reports that the terminal left a command running, which listing
	// a directory through the shell would interrupt; nil means never.
	busy func() bool
}

type editorArgs struct {
	Command    string    `json:"command"`
	Path       string    `json:"path"`
	FileText   *string   `json:"file_text"`
	OldStr     *string   `json:"old_str"`
	NewStr     *string   `json:"new_str"`
	InsertLine *flexNum  `json:"insert_line"`
	ViewRange  *flexInts `json:"view_range"`
}

func (e *editor) run(ctx context.Context, raw string) (observation, error) {
	var args editorArgs
	if err := decodeArgs(raw, &args); err != nil {
		return errorObs("%v", err), nil
	}
	switch args.Command {
	case "view", "create", "str_replace", "insert", "undo_edit":
	case "":
		return errorObs("Parameter `command` is required: one of view, create, str_replace, insert, undo_edit."), nil
	default:
		return errorObs("Unrecognized command %q. The allowed commands for the file_editor tool are: view, create, str_replace, insert, undo_edit.", args.Command), nil
	}
	if args.Path == "" {
		return errorObs("Parameter `path` is required for command: %s.", args.Command), nil
	}
	if !path.IsAbs(args.Path) {
		return errorObs("The path %s is not an absolute path, it should start with `/`. Maybe you meant %s?", args.Path, path.Join(e.sb.WorkDir(), args.Path)), nil
	}
	p := path.Clean(args.Path)
	if !e.sb.Isolated() && !within(p, e.sb.WorkDir()) {
		return errorObs("The path %s is outside the workspace %s; this sandbox does not isolate the host, so the editor only works inside the workspace.", p, e.sb.WorkDir()), nil
	}
	var obs observation
	var err error
	switch args.Command {
	case "view":
		obs, err = e.view(ctx, p, args.ViewRange)
	case "create":
		obs, err = e.create(ctx, p, args.FileText)
	case "str_replace":
		obs, err = e.strReplace(ctx, p, args.OldStr, args.NewStr)
	case "insert":
		obs, err = e.insert(ctx, p, args.InsertLine, args.NewStr)
	case "undo_edit":
		obs, err = e.undo(ctx, p)
	}
	if err != nil && ctx.Err() != nil {
		return observation{}, ctx.Err()
	}
	if err != nil {
		return errorObs("%v", err), nil
	}
	return obs, nil
}

func within(p, dir string) bool {
	dir = path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// read reads a text file, turning sandbox errors into the messages the model sees.
func (e *editor) read(ctx context.Context, p string) (string, error) {
	data, err := e.sb.ReadFile(ctx, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("The path %s does not exist. Please provide a valid path.", p)
		}
		if isDirErr(err) {
			return "", fmt.Errorf("The path %s is a directory and only the `view` command can be used on directories.", p)
		}
		return "", fmt.Errorf("Cannot read %s: %v", p, err)
	}
	if !utf8.Valid(data) || strings.ContainsRune(string(data[:min(len(data), 8000)]), 0) {
		return "", fmt.Errorf("The file %s is not a text file; use the terminal to inspect binary files.", p)
	}
	return string(data), nil
}

func isDirErr(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "is a directory")
}

// write writes content to p. Mode 0 asks the sandbox to keep an existing
// file's permissions (an edit must not drop an executable bit).
func (e *editor) write(ctx context.Context, p, content string, mode fs.FileMode) error {
	if err := e.sb.WriteFile(ctx, p, []byte(content), mode); err != nil {
		return fmt.Errorf("Cannot write %s: %v", p, err)
	}
	return nil
}

func (e *editor) remember(p, old string) {
	if e.history == nil {
		e.history = map[string][]string{}
	}
	h := append(e.history[p], old)
	if len(h) > maxUndo {
		h = h[len(h)-maxUndo:]
	}
	e.history[p] = h
}

func (e *editor) view(ctx context.Context, p string, vr *flexInts) (observation, error) {
	data, err := e.sb.ReadFile(ctx, p)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		return observation{}, fmt.Errorf("The path %s does not exist. Please provide a valid path.", p)
	}
	if err != nil {
		// Most likely a directory: list it with the sandbox's shell.
		if vr != nil {
			return observation{}, errors.New("The `view_range` parameter is not allowed when `path` points to a directory.")
		}
		if e.busy != nil && e.busy() {
			return observation{}, fmt.Errorf("Cannot list %s while a command is still running in the terminal: finish or interrupt it first (terminal with is_input=true), or list the directory there.", p)
		}
		q := shellQuote(p)
		res, xerr := e.sb.Exec(ctx, sandbox.Command{Command: fmt.Sprintf("if [ -d %s ]; then find %s -maxdepth 2 -not -path '*/.*' | sort; else echo __gohands_not_a_dir__; fi", q, q)})
		if xerr != nil {
			return observation{}, fmt.Errorf("Cannot view %s: %v", p, xerr)
		}
		if strings.Contains(res.Output, "__gohands_not_a_dir__") {
			return observation{}, fmt.Errorf("Cannot read %s: %v", p, err)
		}
		return observation{text: fmt.Sprintf("Here's the files and directories up to 2 levels deep in %s, excluding hidden items:\n%s", p, strings.TrimRight(res.Output, "\n"))}, nil
	}
	if !utf8.Valid(data) {
		return observation{}, fmt.Errorf("The file %s is not a text file; use the terminal to inspect binary files.", p)
	}
	lines := splitLines(string(data))
	start, end := 1, len(lines)
	if vr != nil {
		if len(*vr) != 2 {
			return observation{}, errors.New("Invalid `view_range` parameter: it should be a list of two integers.")
		}
		start, end = (*vr)[0], (*vr)[1]
		n := len(lines)
		if start < 1 || start > max(n, 1) {
			return observation{}, fmt.Errorf("Invalid `view_range` parameter: %v. Its first element `%d` should be within the range of lines of the file: [1, %d].", []int(*vr), start, n)
		}
		if end == -1 {
			end = n
		} else if end < start {
			return observation{}, fmt.Errorf("Invalid `view_range` parameter: %v. Its second element `%d` should be greater than or equal to the first element `%d`.", []int(*vr), end, start)
		} else if end > n {
			return observation{}, fmt.Errorf("Invalid `view_range` parameter: %v. Its second element `%d` should be smaller than the number of lines in the file: `%d`.", []int(*vr), end, n)
		}
	}
	return observation{text: fmt.Sprintf("Here's the result of running `cat -n` on %s:\n%s", p, numbered(lines, start, end))}, nil
}

func (e *editor) create(ctx context.Context, p string, text *string) (observation, error) {
	if text == nil {
		return observation{}, errors.New("Parameter `file_text` is required for command: create.")
	}
	if _, err := e.sb.ReadFile(ctx, p); err == nil {
		return observation{}, fmt.Errorf("File already exists at: %s. Cannot overwrite files using command `create`.", p)
	} else if isDirErr(err) {
		return observation{}, fmt.Errorf("The path %s is a directory. Cannot create a file there.", p)
	}
	if err := e.write(ctx, p, *text, 0o644); err != nil {
		return observation{}, err
	}
	return observation{text: "File created successfully at: " + p, filesChanged: true}, nil
}

func (e *editor) strReplace(ctx context.Context, p string, oldStr, newStr *string) (observation, error) {
	if oldStr == nil {
		return observation{}, errors.New("Parameter `old_str` is required for command: str_replace.")
	}
	content, err := e.read(ctx, p)
	if err != nil {
		return observation{}, err
	}
	ns := ""
	if newStr != nil {
		ns = *newStr
	}
	if *oldStr == ns {
		return observation{}, errors.New("No replacement was performed. `new_str` and `old_str` must be different.")
	}
	if *oldStr == "" {
		return observation{}, errors.New("No replacement was performed: `old_str` is empty. Use `insert` to add text, or `create` for a new file.")
	}
	idxs := allIndexes(content, *oldStr)
	switch len(idxs) {
	case 0:
		return observation{}, fmt.Errorf("No replacement was performed, old_str `%s` did not appear verbatim in %s.", *oldStr, p)
	case 1:
	default:
		lines := make([]string, len(idxs))
		for i, at := range idxs {
			lines[i] = fmt.Sprint(strings.Count(content[:at], "\n") + 1)
		}
		return observation{}, fmt.Errorf("No replacement was performed. Multiple occurrences of old_str `%s` in lines [%s]. Please ensure it is unique.", *oldStr, strings.Join(lines, ", "))
	}
	updated := content[:idxs[0]] + ns + content[idxs[0]+len(*oldStr):]
	if err := e.write(ctx, p, updated, 0); err != nil {
		return observation{}, err
	}
	e.remember(p, content)
	at := strings.Count(content[:idxs[0]], "\n") // 0-based line of the edit
	lines := splitLines(updated)
	start := max(at-snippetLines, 0) + 1
	end := min(at+snippetLines+strings.Count(ns, "\n")+1, len(lines))
	return observation{text: editedMessage(p, numbered(lines, start, end)), filesChanged: true}, nil
}

func (e *editor) insert(ctx context.Context, p string, line *flexNum, newStr *string) (observation, error) {
	if line == nil || !line.set {
		return observation{}, errors.New("Parameter `insert_line` is required for command: insert.")
	}
	if newStr == nil {
		return observation{}, errors.New("Parameter `new_str` is required for command: insert.")
	}
	content, err := e.read(ctx, p)
	if err != nil {
		return observation{}, err
	}
	lines := splitLines(content)
	n := int(line.v)
	if float64(n) != line.v || n < 0 || n > len(lines) {
		return observation{}, fmt.Errorf("Invalid `insert_line` parameter: %v. It should be within the range of allowed values: [0, %d]", line.v, len(lines))
	}
	ins := splitLines(*newStr)
	if *newStr == "" {
		ins = []string{""}
	}
	merged := make([]string, 0, len(lines)+len(ins))
	merged = append(merged, lines[:n]...)
	merged = append(merged, ins...)
	merged = append(merged, lines[n:]...)
	updated := strings.Join(merged, "\n")
	if content == "" || strings.HasSuffix(content, "\n") {
		updated += "\n"
	}
	if err := e.write(ctx, p, updated, 0); err != nil {
		return observation{}, err
	}
	e.remember(p, content)
	start := max(n-snippetLines, 0) + 1
	end := min(n+len(ins)+snippetLines, len(merged))
	return observation{text: editedMessage(p, numbered(merged, start, end)), filesChanged: true}, nil
}

func (e *editor) undo(ctx context.Context, p string) (observation, error) {
	h := e.history[p]
	if len(h) == 0 {
		return observation{}, fmt.Errorf("No edit history found for %s.", p)
	}
	prev := h[len(h)-1]
	if err := e.write(ctx, p, prev, 0); err != nil {
		return observation{}, err
	}
	e.history[p] = h[:len(h)-1]
	lines := splitLines(prev)
	return observation{text: fmt.Sprintf("Last edit to %s undone successfully. Here's the result of running `cat -n` on %s:\n%s", p, p, numbered(lines, 1, len(lines))), filesChanged: true}, nil
}

func editedMessage(p, snippet string) string {
	return fmt.Sprintf("The file %s has been edited. Here's the result of running `cat -n` on a snippet of %s:\n%s\nReview the changes and make sure they are as expected. Edit the file again if necessary.", p, p, snippet)
}

// splitLines splits text into lines; a final newline does not start a new line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// numbered formats lines start..end (1-based, inclusive) like cat -n.
func numbered(lines []string, start, end int) string {
	var b strings.Builder
	for i := start; i <= end && i <= len(lines); i++ {
		if i > start {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", i, lines[i-1])
	}
	return b.String()
}

func allIndexes(s, sub string) []int {
	var out []int
	for i := 0; ; {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			return out
		}
		out = append(out, i+j)
		i += j + len(sub)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
