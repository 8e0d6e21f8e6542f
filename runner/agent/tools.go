package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/gohands/gohands/sandbox"
)

// The tool names, as in OpenHands' software-agent SDK.
const (
	ToolTerminal    = "terminal"
	ToolFileEditor  = "file_editor"
	ToolTaskTracker = "task_tracker"
	ToolThink       = "think"
	ToolFinish      = "finish"
)

// toolAliases maps older OpenHands tool names to the current ones.
var toolAliases = map[string]string{
	"execute_bash":       ToolTerminal,
	"bash":               ToolTerminal,
	"str_replace_editor": ToolFileEditor,
}

// toolNames lists the tools in the order they are offered.
var toolNames = []string{ToolTerminal, ToolFileEditor, ToolTaskTracker, ToolThink, ToolFinish}

const terminalDescription = `Run a bash command in a persistent shell inside the sandbox.

* One command per call; chain several with && or ;. The working directory, environment variables and virtualenvs persist between calls.
* Do not use set -e or set -euo pipefail in the shell itself. For long scripts, write them to a file and run the file.
* Run servers and other never-ending commands in the background with output redirected to a file, e.g. ` + "`python3 app.py > server.log 2>&1 &`" + `.
* Set "timeout" (seconds) for commands that take long, such as installs or test suites.
* If a command is still running (exit code -1), call again with is_input=true: an empty command shows more output, text is sent to the process's stdin, and C-c, C-d or C-z send those keys.
* Long output is cut in the middle.
* reset=true starts a fresh shell when the terminal stops responding; environment and working directory are lost.`

const fileEditorDescription = `View, create and edit plain-text files inside the sandbox.

* view: a file is shown like ` + "`cat -n`" + ` (optionally only view_range [start, end], 1-based, end -1 for the end of the file); a directory lists non-hidden files and directories two levels deep.
* create: writes file_text to a new file; it refuses a path that already exists.
* str_replace: replaces old_str, which must occur exactly once and verbatim (whitespace and indentation included), with new_str. Include enough surrounding lines to make old_str unique.
* insert: inserts new_str after line insert_line (0 inserts at the top).
* undo_edit: restores the file as it was before the last edit made with this tool.
* Paths must be absolute (start with /).
* Long output is cut in the middle.`

const taskTrackerDescription = `Keep a task list for multi-step work, so progress stays visible.

* view shows the current list. plan replaces the whole list with task_list; keep the id of tasks you update, omit it for new ones.
* Each task has a title, optional notes and a status: todo, in_progress or done. Keep one task in_progress at a time and mark a task done only when it is fully done (tests passing).
* Skip the tracker for single, trivial steps.`

const thinkDescription = `Write down a thought: reasoning about the problem, a plan, hypotheses about a bug, or an assessment of test results. It changes nothing and gets no new information; use it when careful reasoning helps.`

const finishDescription = `Signal that the task is done, or that you cannot go on. The message is shown to the people who asked: say what you changed and why, and which tests you ran with their result; if no code change was needed, give the answer instead.`

// toolDefs returns the OpenAI tool definitions, built once. The JSON schemas
// follow OpenHands' tools so that models tuned on its trajectories work unchanged.
func toolDefs() []openai.Tool { return builtTools }

// builtTools holds the definitions with pre-encoded schemas, so that each
// request does not encode them again.
var builtTools = buildTools()

func buildTools() []openai.Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	schemas := map[string]map[string]any{
		ToolTerminal: {
			"type": "object",
			"properties": map[string]any{
				"command":  str("The bash command to run. Empty with is_input=true to see more output of a running command; C-c, C-d or C-z with is_input=true to send those keys."),
				"is_input": map[string]any{"type": "boolean", "description": "If true, command is sent to the running process as input instead of being run as a new command. Default false."},
				"timeout":  map[string]any{"type": "number", "description": "Optional limit in seconds for the command; raise it for installs and test suites."},
				"reset":    map[string]any{"type": "boolean", "description": "If true, kill the shell and start a fresh one. Cannot be combined with is_input."},
			},
			"required": []string{"command"},
		},
		ToolFileEditor: {
			"type": "object",
			"properties": map[string]any{
				"command":     map[string]any{"type": "string", "enum": []string{"view", "create", "str_replace", "insert", "undo_edit"}, "description": "The command to run: view, create, str_replace, insert or undo_edit."},
				"path":        str("Absolute path to the file or directory."),
				"file_text":   str("Required for create: the content of the new file."),
				"old_str":     str("Required for str_replace: the exact text to replace."),
				"new_str":     str("For str_replace, the replacement text (empty deletes old_str); required for insert: the text to insert."),
				"insert_line": map[string]any{"type": "integer", "minimum": 0, "description": "Required for insert: new_str is inserted after this line (0 for the top)."},
				"view_range":  map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "description": "Optional for view on a file: [start, end] lines, 1-based; end -1 means to the end of the file."},
			},
			"required": []string{"command", "path"},
		},
		ToolTaskTracker: {
			"type": "object",
			"properties": map[string]any{
				"command": map[string]any{"type": "string", "enum": []string{"view", "plan"}, "description": "view shows the task list; plan replaces it with task_list."},
				"task_list": map[string]any{
					"type":        "array",
					"description": "The full task list, required for plan.",
					"items": map[string]any{
						"type": "object",
						"properties": map[string]any{
							"id":     str("The task's id; keep it when updating a task, omit it for a new one."),
							"title":  str("A short title."),
							"notes":  str("Optional details."),
							"status": map[string]any{"type": "string", "enum": []string{"todo", "in_progress", "done"}, "description": "todo, in_progress or done."},
						},
						"required": []string{"title"},
					},
				},
			},
			"required": []string{"command"},
		},
		ToolThink: {
			"type":       "object",
			"properties": map[string]any{"thought": str("The thought to write down.")},
			"required":   []string{"thought"},
		},
		ToolFinish: {
			"type":       "object",
			"properties": map[string]any{"message": str("The final message: what changed and why, and the tests run with their result; or the answer when no change was needed.")},
			"required":   []string{"message"},
		},
	}
	descs := map[string]string{
		ToolTerminal: terminalDescription, ToolFileEditor: fileEditorDescription,
		ToolTaskTracker: taskTrackerDescription, ToolThink: thinkDescription, ToolFinish: finishDescription,
	}
	tools := make([]openai.Tool, 0, len(toolNames))
	for _, name := range toolNames {
		params, err := json.Marshal(schemas[name])
		if err != nil {
			panic(fmt.Sprintf("agent: tool schema %s does not encode: %v", name, err)) // a bug in the literals above
		}
		tools = append(tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: name, Description: descs[name], Parameters: json.RawMessage(params),
		}})
	}
	return tools
}

// observation is what a tool call produced for the model.
type observation struct {
	text         string
	isError      bool
	filesChanged bool
	finish       bool
}

func errorObs(format string, args ...any) observation {
	return observation{text: "ERROR:\n" + fmt.Sprintf(format, args...), isError: true}
}

// flexBool accepts true, false and their string forms (older OpenHands tools
// sent is_input as "true"/"false").
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	switch strings.ToLower(s) {
	case "true":
		*b = true
	case "false", "", "null":
		*b = false
	default:
		return fmt.Errorf("want true or false, got %s", data)
	}
	return nil
}

// flexNum accepts a number or a numeric string.
type flexNum struct {
	v   float64
	set bool
}

func (n *flexNum) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	if s == "" || s == "null" {
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("want a number, got %s", data)
	}
	n.v, n.set = v, true
	return nil
}

// flexInts accepts [1, 2] or the string "[1, 2]".
type flexInts []int

func (f *flexInts) UnmarshalJSON(data []byte) error {
	if s, err := strconv.Unquote(string(data)); err == nil {
		data = []byte(s)
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	var v []int
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("want a list of integers, got %s", data)
	}
	*f = v
	return nil
}

// decodeArgs decodes a tool call's JSON arguments into v; an empty string
// counts as an empty object.
func decodeArgs(raw string, v any) error {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return fmt.Errorf("the arguments are not valid JSON (%v); send them again as one JSON object", err)
		case errors.As(err, &typ):
			return fmt.Errorf("parameter %q has the wrong type: want %s, got a JSON %s", typ.Field, typ.Type, typ.Value)
		default:
			return fmt.Errorf("the arguments could not be read: %v", err)
		}
	}
	return nil
}

type terminalArgs struct {
	Command *string  `json:"command"`
	IsInput flexBool `json:"is_input"`
	Timeout flexNum  `json:"timeout"`
	Reset   flexBool `json:"reset"`
}

// runTerminal executes a terminal call on the sandbox's persistent shell.
func (a *run) runTerminal(ctx context.Context, raw string) (observation, error) {
	var args terminalArgs
	if err := decodeArgs(raw, &args); err != nil {
		return errorObs("%v", err), nil
	}
	if args.Command == nil && !bool(args.Reset) {
		return errorObs("Parameter `command` is required for the terminal tool."), nil
	}
	if args.Reset && args.IsInput {
		return errorObs("reset=true cannot be combined with is_input=true."), nil
	}
	if args.Timeout.set && args.Timeout.v < 0 {
		return errorObs("Parameter `timeout` must not be negative, got %v.", args.Timeout.v), nil
	}
	cmd := sandbox.Command{IsInput: bool(args.IsInput), Reset: bool(args.Reset)}
	if args.Command != nil {
		cmd.Command = *args.Command
	}
	clamped := ""
	if args.Timeout.set && args.Timeout.v > 0 {
		cmd.Timeout = time.Duration(args.Timeout.v * float64(time.Second))
		if cmd.Timeout > MaxCommandTimeout {
			cmd.Timeout = MaxCommandTimeout
			clamped = fmt.Sprintf("[The timeout was lowered to the maximum of %s.]\n", MaxCommandTimeout)
		}
	}
	if !cmd.IsInput && !cmd.Reset && strings.TrimSpace(cmd.Command) == "" {
		return errorObs("No command given. To see more output of a running command, send an empty command with is_input=true."), nil
	}
	res, err := a.sb.Exec(ctx, cmd)
	a.termRunning = err == nil && res.Running
	if err != nil {
		if ctx.Err() != nil {
			return observation{}, ctx.Err()
		}
		return observation{text: fmt.Sprintf("ERROR:\nThe command could not be run: %v", err), isError: true, filesChanged: true}, nil
	}
	var b strings.Builder
	b.WriteString(clamped)
	b.WriteString(res.Output)
	if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
		b.WriteByte('\n')
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "[The command ran past its timeout. Run it again with a larger \"timeout\", or in the background with its output sent to a file.]\n")
	case res.Running:
		fmt.Fprintf(&b, "[The command is still running. Call the terminal with is_input=true: an empty command shows more output, text is sent to the process, C-c interrupts it.]\n")
	}
	if res.Cwd != "" {
		fmt.Fprintf(&b, "[Current working directory: %s]\n", res.Cwd)
	}
	if !res.Running {
		fmt.Fprintf(&b, exitCodeFormat, res.ExitCode)
	}
	return observation{text: strings.TrimRight(b.String(), "\n"), filesChanged: true}, nil
}

// TaskItem is one entry of the agent's task_tracker list.
type TaskItem struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Notes  string `json:"notes,omitempty"`
	Status string `json:"status"`
}

type taskTrackerArgs struct {
	Command  string     `json:"command"`
	TaskList []TaskItem `json:"task_list"`
}

func (a *run) runTaskTracker(raw string) observation {
	var args taskTrackerArgs
	if err := decodeArgs(raw, &args); err != nil {
		return errorObs("%v", err)
	}
	switch args.Command {
	case "", "view":
		if len(a.tasks) == 0 {
			return observation{text: `No task list yet. Use the "plan" command to create one.`}
		}
		return observation{text: formatTasks(a.tasks)}
	case "plan":
		used := map[string]bool{}
		for _, t := range args.TaskList {
			used[t.ID] = true
		}
		list := make([]TaskItem, 0, len(args.TaskList))
		for i, t := range args.TaskList {
			if strings.TrimSpace(t.Title) == "" {
				return errorObs("Task %d has no title.", i+1)
			}
			switch t.Status {
			case "":
				t.Status = "todo"
			case "todo", "in_progress", "done":
			default:
				return errorObs("Task %d (%q) has status %q; use todo, in_progress or done.", i+1, t.Title, t.Status)
			}
			if t.ID == "" {
				for {
					a.taskSeq++
					t.ID = strconv.Itoa(a.taskSeq)
					if !used[t.ID] {
						break
					}
				}
				used[t.ID] = true
			}
			list = append(list, t)
		}
		a.tasks = list
		return observation{text: fmt.Sprintf("Task list has been updated with %d item(s).\n\n%s", len(list), formatTasks(list))}
	default:
		return errorObs("Unknown command %q for task_tracker; use view or plan.", args.Command)
	}
}

func formatTasks(tasks []TaskItem) string {
	if len(tasks) == 0 {
		return "The task list is empty."
	}
	var b strings.Builder
	b.WriteString("# Task List\n")
	for i, t := range tasks {
		fmt.Fprintf(&b, "\n%d. [%s] [%s] %s", i+1, t.Status, t.ID, t.Title)
		if t.Notes != "" {
			fmt.Fprintf(&b, "\n   %s", t.Notes)
		}
	}
	return b.String()
}

func runThink(raw string) observation {
	var args struct {
		Thought *string `json:"thought"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return errorObs("%v", err)
	}
	if args.Thought == nil {
		return errorObs("Parameter `thought` is required for the think tool.")
	}
	return observation{text: "Your thought has been logged."}
}

func runFinish(raw string) (string, observation) {
	var args struct {
		Message *string `json:"message"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return "", errorObs("%v", err)
	}
	if args.Message == nil || strings.TrimSpace(*args.Message) == "" {
		return "", errorObs("Parameter `message` is required for finish: say what you changed and why, and which tests you ran (or give your answer).")
	}
	return *args.Message, observation{text: "Finished.", finish: true}
}

// dispatch runs one tool call. It returns an error only when the loop must
// stop (the context ended); everything else is an observation for the model.
func (a *run) dispatch(ctx context.Context, name, raw string) (observation, string, error) {
	if canon, ok := toolAliases[name]; ok {
		name = canon
	}
	switch name {
	case ToolTerminal:
		obs, err := a.runTerminal(ctx, raw)
		return obs, "", err
	case ToolFileEditor:
		obs, err := a.editor.run(ctx, raw)
		return obs, "", err
	case ToolTaskTracker:
		return a.runTaskTracker(raw), "", nil
	case ToolThink:
		return runThink(raw), "", nil
	case ToolFinish:
		msg, obs := runFinish(raw)
		return obs, msg, nil
	default:
		return errorObs("Unknown tool %q. The tools are: %s.", name, strings.Join(toolNames, ", ")), "", nil
	}
}

// exitCodeFormat ends a terminal observation of a finished command.
const exitCodeFormat = "[Command finished with exit code %d]"

var exitCodeRe = regexp.MustCompile(`\[Command finished with exit code (-?\d+)\]`)

// ExitCode reads the exit code a terminal observation (or an event's
// content) reports; ok is false while the command still runs.
func ExitCode(observation string) (code int, ok bool) {
	m := exitCodeRe.FindStringSubmatch(observation)
	if m == nil {
		return 0, false
	}
	code, err := strconv.Atoi(m[1])
	return code, err == nil
}
