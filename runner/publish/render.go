package publish

import (
	"fmt"
	"strings"
	"time"
)

// Marker is the hidden line that ties a comment or PR body to a job, so a
// restarted job finds its own tracking comment instead of adding another.
func Marker(jobID string) string { return "<!-- gohands:job=" + jobID + " -->" }

// Phase is where a running job is, as the tracking comment shows it.
type Phase string

// The phases of a job before its outcome.
const (
	PhaseQueued    Phase = "queued"
	PhasePreparing Phase = "preparing"
	PhaseRunning   Phase = "running"
	PhasePushing   Phase = "pushing"
)

// TaskStatus is the state of one item of the agent's task list.
type TaskStatus string

// Task states, as the agent's task_tracker tool names them.
const (
	TaskTodo       TaskStatus = "todo"
	TaskInProgress TaskStatus = "in_progress"
	TaskDone       TaskStatus = "done"
)

// Task is one item of the agent's plan.
type Task struct {
	Title  string
	Status TaskStatus
}

// Status is what the tracking comment shows while a job runs.
type Status struct {
	Phase Phase
	// Step is what is happening now, in a short line ("Running `go test ./...`").
	Step    string
	Tasks   []Task
	Elapsed time.Duration
	// Requester is the login of the person who asked.
	Requester string
	// NotIsolated is set when the sandbox is the process driver: commands run on the host.
	NotIsolated bool
	// Notes are what the person who asked should know about how the job
	// read the issue, one paragraph each.
	Notes []string
}

// OutcomeKind is how a job ended.
type OutcomeKind string

// The ways a job ends.
const (
	OutcomeSucceeded OutcomeKind = "succeeded"
	OutcomeFailed    OutcomeKind = "failed"
	OutcomeCancelled OutcomeKind = "cancelled"
)

// Outcome is the final word of the tracking comment.
type Outcome struct {
	Kind OutcomeKind
	// PRNumber and PRURL name the pull request opened or updated; PRCreated
	// tells which. Zero when the job answered without changing code.
	PRNumber  int
	PRURL     string
	PRCreated bool
	// Summary is the agent's finish message (success) or the answer to a question.
	Summary string
	// Failure says what failed, in words a person understands.
	Failure string
	// Limit names the budget that stopped the job, e.g.
	// "stopped after 50 iterations (llm.max_iterations)".
	Limit string
	// Mention is the bot's @-mention ("@gohands"), for the retry hint.
	Mention string
	// Branch is the job's branch; what was pushed stays there.
	Branch string
	// CancelledBy is the login of the person who stopped the job.
	CancelledBy string
	Tasks       []Task
	Elapsed     time.Duration
	Requester   string
	NotIsolated bool
	Notes       []string
}

var phaseText = map[Phase]string{
	PhaseQueued:    "⏳ **Queued** — waiting for a free worker.",
	PhasePreparing: "🔧 **Preparing** — fetching the repository and starting the sandbox.",
	PhaseRunning:   "🤖 **Working** on it.",
	PhasePushing:   "⬆️ **Pushing** the branch and updating the pull request.",
}

const notIsolatedNote = "> [!WARNING]\n> This job runs with the `process` sandbox driver: commands run on the gohands host, without isolation.\n"

// RenderStatus renders the tracking comment of a running job. It is pure: same input, same text.
func RenderStatus(jobID string, s Status) string {
	var b strings.Builder
	b.WriteString(Marker(jobID) + "\n")
	text, ok := phaseText[s.Phase]
	if !ok {
		text = fmt.Sprintf("🤖 **%s**", s.Phase)
	}
	b.WriteString(text + "\n")
	if s.Step != "" {
		fmt.Fprintf(&b, "\n%s\n", oneLine(s.Step))
	}
	writeTasks(&b, s.Tasks)
	writeFooter(&b, s.Elapsed, s.Requester, "elapsed")
	writeNotes(&b, s.NotIsolated, s.Notes)
	return b.String()
}

// RenderOutcome renders the tracking comment of a finished job. It is pure: same input, same text.
func RenderOutcome(jobID string, o Outcome) string {
	var b strings.Builder
	b.WriteString(Marker(jobID) + "\n")
	switch o.Kind {
	case OutcomeSucceeded:
		switch {
		case o.PRNumber != 0 && o.PRCreated:
			fmt.Fprintf(&b, "✅ **Done** — opened pull request #%d%s\n", o.PRNumber, linkSuffix(o.PRURL))
		case o.PRNumber != 0:
			fmt.Fprintf(&b, "✅ **Done** — updated pull request #%d%s\n", o.PRNumber, linkSuffix(o.PRURL))
		default:
			b.WriteString("✅ **Done** — no code change was needed.\n")
		}
		if s := strings.TrimSpace(o.Summary); s != "" {
			fmt.Fprintf(&b, "\n%s\n", s)
		}
	case OutcomeFailed:
		failure := strings.TrimSpace(o.Failure)
		if failure == "" {
			failure = "the job stopped without saying why."
		}
		fmt.Fprintf(&b, "❌ **Failed** — %s\n", failure)
		if o.Limit != "" {
			fmt.Fprintf(&b, "\n**Limit reached:** %s.\n", strings.TrimSuffix(o.Limit, "."))
		}
		if o.Branch != "" {
			fmt.Fprintf(&b, "\nWhat was pushed stays on branch `%s`.", o.Branch)
			fmt.Fprintf(&b, " To retry, comment `%s <instructions>` to continue from the branch.\n", mention(o.Mention))
		} else {
			fmt.Fprintf(&b, "\nTo retry, comment `%s <instructions>`.\n", mention(o.Mention))
		}
	case OutcomeCancelled:
		by := "Stopped"
		if o.CancelledBy != "" {
			by = "Stopped by @" + o.CancelledBy
		}
		fmt.Fprintf(&b, "⏹️ **%s.**", by)
		if o.Branch != "" {
			fmt.Fprintf(&b, " What was pushed stays on branch `%s`.", o.Branch)
		}
		fmt.Fprintf(&b, "\n\nTo start again, comment `%s <instructions>`.\n", mention(o.Mention))
	default:
		fmt.Fprintf(&b, "**%s**\n", o.Kind)
	}
	if len(o.Tasks) > 0 {
		b.WriteString("\n<details><summary>Task list</summary>\n")
		writeTasks(&b, o.Tasks)
		b.WriteString("\n</details>\n")
	}
	writeFooter(&b, o.Elapsed, o.Requester, "took")
	writeNotes(&b, o.NotIsolated, o.Notes)
	return b.String()
}

// writeNotes ends a tracking comment with its notes, the warning about a
// sandbox without isolation last.
func writeNotes(b *strings.Builder, notIsolated bool, notes []string) {
	for _, n := range notes {
		b.WriteString("\n> [!NOTE]\n> " + strings.ReplaceAll(strings.TrimSpace(n), "\n", "\n> ") + "\n")
	}
	if notIsolated {
		b.WriteString("\n" + notIsolatedNote)
	}
}

func mention(m string) string {
	if m == "" {
		return "@gohands"
	}
	return m
}

func writeTasks(b *strings.Builder, tasks []Task) {
	if len(tasks) == 0 {
		return
	}
	b.WriteString("\n")
	for _, t := range tasks {
		title := oneLine(t.Title)
		switch t.Status {
		case TaskDone:
			fmt.Fprintf(b, "- [x] %s\n", title)
		case TaskInProgress:
			fmt.Fprintf(b, "- [ ] **%s** ← in progress\n", title)
		default:
			fmt.Fprintf(b, "- [ ] %s\n", title)
		}
	}
}

func writeFooter(b *strings.Builder, elapsed time.Duration, requester, verb string) {
	var parts []string
	if elapsed > 0 {
		parts = append(parts, verb+" "+FormatDuration(elapsed))
	}
	if requester != "" {
		parts = append(parts, "requested by @"+requester)
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\n<sub>%s</sub>\n", strings.Join(parts, " · "))
	}
}

// oneLine keeps text on one Markdown line, so a task or step cannot break the comment's layout.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// FormatDuration writes a duration for people: "42s", "3m 05s", "1h 02m".
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// linkSuffix is ": URL", or nothing when there is no URL (the comment is on
// that pull request already).
func linkSuffix(url string) string {
	if url == "" {
		return ""
	}
	return ": " + url
}
