// Package agent runs the LLM agent loop: it sends the conversation and the
// OpenHands-compatible tools (terminal, file_editor, task_tracker, think,
// finish) to any OpenAI-compatible endpoint, runs the tool calls in the
// sandbox, and repeats until the model calls finish or a limit is hit.
//
// It is the only package that imports go-openai.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/skills"
)

// Defaults applied where a Config value is zero.
// MaxCommandTimeout is the longest a single terminal call may wait: a
// model asking for more would hold the shell for its whole budget.
const MaxCommandTimeout = 30 * time.Minute

const (
	DefaultMaxIterations  = 50
	DefaultContextWindow  = 128000
	DefaultMaxObservation = 12000
	DefaultKeepLast       = 10
	DefaultRetryBase      = time.Second
	DefaultMaxRetries     = 5
	DefaultRequestTimeout = 5 * time.Minute
	DefaultStuckRepeats   = 3
)

// condenseAt is the share of the context window at which older steps are condensed.
const condenseAt = 0.75

// Stop reasons in Result.Stop.
const (
	StopFinished      = "finished"
	StopMaxIterations = "max_iterations"
	StopMaxTokens     = "max_tokens"
	StopWallClock     = "wall_clock"
	StopStuck         = "stuck"
	StopCancelled     = "cancelled"
	StopLLMError      = "llm_error"
	StopHook          = "hook"
	StopEventLog      = "event_log"
)

// Config configures the loop. Zero values take the defaults above; a zero
// MaxTokens or WallClock means no limit.
type Config struct {
	// BaseURL, APIKey and Model select the OpenAI-compatible endpoint (llm.base_url, llm.api_key, llm.model).
	BaseURL, APIKey, Model string
	// MaxIterations bounds the model calls (llm.max_iterations).
	MaxIterations int
	// MaxTokens bounds the prompt+completion tokens the API reports (llm.max_tokens).
	MaxTokens int
	// WallClock bounds the whole loop; WallClockKey is the configuration key
	// named in the stop reason ("llm.wall_clock" when empty).
	WallClock    time.Duration
	WallClockKey string
	// ContextWindow is the model's context size in tokens; older steps are
	// condensed into a summary when a request would pass 3/4 of it.
	ContextWindow int
	// KeepLast is how many recent model turns condensation keeps verbatim.
	KeepLast int
	// MaxObservation caps an observation in characters (head and tail kept).
	MaxObservation int
	// Secrets are masked in everything sent to the model, logged, or returned.
	Secrets []string
	// HTTPClient is used for the model API; nil means a default client.
	HTTPClient *http.Client
	// RetryBase is the first back-off delay; MaxRetries caps the retries of one request.
	RetryBase  time.Duration
	MaxRetries int
	// RequestTimeout bounds one model request attempt.
	RequestTimeout time.Duration
	// StuckRepeats is how many identical action/observation pairs, or answers
	// without a tool call in a row, count as stuck (nudge first, then stop).
	StuckRepeats int
	Logger       *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxIterations, DefaultMaxIterations)
	def(&c.ContextWindow, DefaultContextWindow)
	def(&c.MaxObservation, DefaultMaxObservation)
	def(&c.KeepLast, DefaultKeepLast)
	def(&c.MaxRetries, DefaultMaxRetries)
	def(&c.StuckRepeats, DefaultStuckRepeats)
	if c.RetryBase <= 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.WallClockKey == "" {
		c.WallClockKey = "llm.wall_clock"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Task is what the agent is asked to do: the rendered prompts and the
// repository's skills. Always-on skills are added to the system prompt,
// triggered ones to the user message that mentions them.
type Task struct {
	System string
	User   string
	Skills skills.Set
}

// Step describes one executed tool call, for progress reports.
type Step struct {
	Iteration int    `json:"iteration"`
	Tool      string `json:"tool"`
	// Args and Observation are short, masked summaries.
	Args        string `json:"args"`
	Observation string `json:"observation"`
	IsError     bool   `json:"is_error,omitempty"`
	// FilesChanged is set after file_editor edits and after any terminal command.
	FilesChanged bool       `json:"files_changed,omitempty"`
	Tasks        []TaskItem `json:"tasks,omitempty"`
}

// Hooks let the caller follow and steer a running loop.
type Hooks struct {
	// OnStep is called after each tool call, a safe point to copy changes out
	// or report progress. Returning an error stops the loop.
	OnStep func(ctx context.Context, s Step) error
	// Messages, when set, is asked before each model request for new user
	// messages (e.g. comments that arrived during the job); they are appended
	// to the conversation and can trigger skills.
	Messages func(ctx context.Context) []string
}

// Result is how a loop ended.
type Result struct {
	// Finished is set when the model called finish; Message is its masked message.
	Finished bool   `json:"finished"`
	Message  string `json:"message,omitempty"`
	// Stop is one of the Stop constants; Reason says it in a sentence that
	// names the limit.
	Stop             string        `json:"stop"`
	Reason           string        `json:"reason"`
	Iterations       int           `json:"iterations"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	Duration         time.Duration `json:"duration"`
	Tasks            []TaskItem    `json:"tasks,omitempty"`
	// Condensations counts how often older steps were summarised.
	Condensations int `json:"condensations,omitempty"`
}

// Run runs the agent loop on sb until the model calls finish or a limit
// stops it. Budget stops return a Result and a nil error; a cancelled ctx
// returns Stop "cancelled" and ctx's error; a model API that keeps failing
// returns Stop "llm_error" and the error. log may be nil.
func Run(ctx context.Context, cfg Config, sb sandbox.Sandbox, task Task, log EventLog, hooks Hooks) (Result, error) {
	cfg = cfg.withDefaults()
	if sb == nil {
		return Result{}, errors.New("agent: no sandbox")
	}
	if strings.TrimSpace(task.User) == "" {
		return Result{}, errors.New("agent: the task has no user message")
	}
	r := &run{
		cfg:   cfg,
		sb:    sb,
		llm:   newLLMClient(cfg),
		log:   log,
		hooks: hooks,
		mask:  NewMasker(cfg.Secrets...),
		seen:  map[string]bool{},
		task:  task,
		tools: toolDefs(),
		start: time.Now(),
	}
	r.editor = &editor{sb: sb, busy: func() bool { return r.termRunning }}
	r.llm.onRetry = r.onRetry
	res, err := r.loop(ctx)
	res.Iterations = r.iteration
	res.PromptTokens, res.CompletionTokens = r.promptTokens, r.completionTokens
	res.Duration = time.Since(r.start)
	res.Tasks = append([]TaskItem(nil), r.tasks...)
	res.Condensations = r.condensations
	res.Message = r.mask.Mask(res.Message)
	res.Reason = r.mask.Mask(res.Reason)
	stop := Event{Kind: EventStop, Stop: res.Stop, Reason: res.Reason, Content: res.Message,
		PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, DurationMS: res.Duration.Milliseconds()}
	if err != nil {
		stop.Error = err.Error()
	}
	// The stop event is written even when ctx is cancelled.
	if lerr := r.emit(context.WithoutCancel(ctx), stop); lerr != nil && err == nil {
		err = lerr
	}
	cfg.Logger.InfoContext(ctx, "agent stopped", "stop", res.Stop, "reason", res.Reason, "iterations", res.Iterations,
		"prompt_tokens", res.PromptTokens, "completion_tokens", res.CompletionTokens, "duration", res.Duration)
	return res, err
}

// run is the state of one loop.
type run struct {
	cfg    Config
	sb     sandbox.Sandbox
	llm    *llmClient
	log    EventLog
	hooks  Hooks
	mask   *Masker
	editor *editor
	task   Task
	tools  []openai.Tool
	start  time.Time

	msgs    []openai.ChatCompletionMessage
	seen    map[string]bool
	tasks   []TaskItem
	taskSeq int

	iteration                      int
	promptTokens, completionTokens int
	// lastPrompt is the prompt_tokens of the last answer, for msgs[:sentLen].
	lastPrompt, sentLen int
	condensations       int

	noToolStreak int
	lastSig      string
	repeats      int
	nudgedRepeat bool
	// termRunning is set while the terminal's last command still runs.
	termRunning bool
}

func (r *run) emit(ctx context.Context, e Event) error {
	if r.log == nil {
		return nil
	}
	e.Time = time.Now().UTC()
	if e.Iteration == 0 {
		e.Iteration = r.iteration
	}
	e.Content, e.Args, e.Error, e.Reason = r.mask.Mask(e.Content), r.mask.Mask(e.Args), r.mask.Mask(e.Error), r.mask.Mask(e.Reason)
	for i := range e.ToolCalls {
		e.ToolCalls[i].Arguments = r.mask.Mask(e.ToolCalls[i].Arguments)
	}
	if err := r.log.Append(ctx, e); err != nil {
		return fmt.Errorf("append %s event to the job log: %w", e.Kind, err)
	}
	return nil
}

func (r *run) onRetry(attempt int, delay time.Duration, err error) {
	r.cfg.Logger.Warn("model request failed, retrying", "attempt", attempt, "delay", delay, "err", err)
	_ = r.emit(context.Background(), Event{Kind: EventRetry, IsError: true, Error: err.Error(), DurationMS: delay.Milliseconds()})
}

// addUser appends a user message, with the skills it triggers.
func (r *run) addUser(ctx context.Context, text string) error {
	return r.addUserMessage(ctx, text, true)
}

// addNudge appends gohands' own reminder: its words trigger no skill.
func (r *run) addNudge(ctx context.Context, text string) error {
	return r.addUserMessage(ctx, text, false)
}

func (r *run) addUserMessage(ctx context.Context, text string, triggers bool) error {
	var b strings.Builder
	b.WriteString(r.mask.Mask(text))
	var triggered []skills.Skill
	if triggers {
		triggered = r.task.Skills.Triggered(text, r.seen)
	}
	for _, sk := range triggered {
		fmt.Fprintf(&b, "\n\n<EXTRA_INFO>\nThe following information was added because this message mentions a keyword of the %q skill; it may or may not be relevant.\n\n%s\n</EXTRA_INFO>", sk.Name, sk.Content)
	}
	content := b.String()
	r.msgs = append(r.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: content})
	return r.emit(ctx, Event{Kind: EventUser, Content: content})
}

func (r *run) systemPrompt() string {
	var b strings.Builder
	b.WriteString(r.task.System)
	always := r.task.Skills.AlwaysOn()
	if len(always) > 0 {
		b.WriteString("\n\n<REPOSITORY_INSTRUCTIONS>")
		for _, sk := range always {
			fmt.Fprintf(&b, "\n\n[%s] (from %s)\n%s", sk.Name, sk.Path, sk.Content)
		}
		b.WriteString("\n</REPOSITORY_INSTRUCTIONS>")
	}
	return r.mask.Mask(b.String())
}

// stop builds the Result for a stop with its reason.
func stop(kind, reason string) Result { return Result{Stop: kind, Reason: reason} }

// ctxStop turns an ended context into a Result: the caller's cancellation,
// or the wall-clock limit of runCtx.
func (r *run) ctxStop(ctx context.Context) (Result, error) {
	if ctx.Err() != nil {
		return stop(StopCancelled, "cancelled"), ctx.Err()
	}
	return stop(StopWallClock, fmt.Sprintf("stopped after %s, the wall-clock limit (%s)", r.cfg.WallClock, r.cfg.WallClockKey)), nil
}

func (r *run) loop(ctx context.Context) (Result, error) {
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if r.cfg.WallClock > 0 {
		runCtx, cancel = context.WithTimeout(ctx, r.cfg.WallClock)
	}
	defer cancel()

	system := r.systemPrompt()
	r.msgs = append(r.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: system})
	if err := r.emit(ctx, Event{Kind: EventSystem, Content: system}); err != nil {
		return stop(StopEventLog, "the job log failed"), err
	}
	if err := r.addUser(ctx, r.task.User); err != nil {
		return stop(StopEventLog, "the job log failed"), err
	}
	for {
		if runCtx.Err() != nil {
			return r.ctxStop(ctx)
		}
		if r.iteration >= r.cfg.MaxIterations {
			return stop(StopMaxIterations, fmt.Sprintf("stopped after %d iterations (llm.max_iterations)", r.iteration)), nil
		}
		if used := r.promptTokens + r.completionTokens; r.cfg.MaxTokens > 0 && used >= r.cfg.MaxTokens {
			return stop(StopMaxTokens, fmt.Sprintf("stopped after using %d tokens, the budget is %d (llm.max_tokens)", used, r.cfg.MaxTokens)), nil
		}
		if r.hooks.Messages != nil {
			for _, m := range r.hooks.Messages(runCtx) {
				if err := r.addUser(ctx, m); err != nil {
					return stop(StopEventLog, "the job log failed"), err
				}
			}
		}
		if err := r.maybeCondense(runCtx); err != nil {
			if runCtx.Err() != nil {
				return r.ctxStop(ctx)
			}
			return stop(StopEventLog, "the job log failed"), err
		}
		res, done, err := r.turn(ctx, runCtx)
		if done {
			return res, err
		}
	}
}

// turn is one model call and its tool calls; done reports that the loop ends.
func (r *run) turn(ctx, runCtx context.Context) (res Result, done bool, err error) {
	r.iteration++
	est := r.estimate()
	if err := r.emit(ctx, Event{Kind: EventRequest, Messages: len(r.msgs), EstimatedTokens: est}); err != nil {
		return stop(StopEventLog, "the job log failed"), true, err
	}
	started := time.Now()
	resp, err := r.llm.complete(runCtx, openai.ChatCompletionRequest{Messages: r.msgs, Tools: r.tools})
	if err != nil {
		r.iteration-- // no answer, no iteration
		if runCtx.Err() != nil {
			res, err := r.ctxStop(ctx)
			return res, true, err
		}
		return stop(StopLLMError, r.mask.Mask(fmt.Sprintf("the model API failed: %v", err))), true, err
	}
	pt, ct := resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	if pt == 0 {
		pt = est
	}
	r.promptTokens += pt
	r.completionTokens += ct
	r.lastPrompt, r.sentLen = pt, len(r.msgs)

	msg := resp.Choices[0].Message
	am := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: msg.Content, ToolCalls: msg.ToolCalls}
	logged := make([]ToolCall, len(am.ToolCalls))
	for i := range am.ToolCalls {
		tc := &am.ToolCalls[i]
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d_%d", r.iteration, i)
		}
		tc.Type = openai.ToolTypeFunction
		tc.Index = nil
		logged[i] = ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
	}
	r.msgs = append(r.msgs, am)
	if err := r.emit(ctx, Event{Kind: EventAssistant, Content: msg.Content, ToolCalls: logged, PromptTokens: pt, CompletionTokens: ct,
		DurationMS: time.Since(started).Milliseconds()}); err != nil {
		return stop(StopEventLog, "the job log failed"), true, err
	}

	if len(am.ToolCalls) == 0 {
		r.noToolStreak++
		if r.noToolStreak >= r.cfg.StuckRepeats {
			return stop(StopStuck, fmt.Sprintf("stopped: the model answered %d times in a row without calling a tool", r.noToolStreak)), true, nil
		}
		if err := r.addNudge(ctx, "Your last answer had no tool call. Continue the task with the tools. When you are done, call `finish` with a summary of what you changed and why and the tests you ran, or with your answer if no code change is needed."); err != nil {
			return stop(StopEventLog, "the job log failed"), true, err
		}
		return Result{}, false, nil
	}
	r.noToolStreak = 0

	nudge := ""
	for _, tc := range am.ToolCalls {
		t0 := time.Now()
		obs, finishMsg, err := r.dispatch(runCtx, tc.Function.Name, tc.Function.Arguments)
		if err != nil {
			res, err := r.ctxStop(ctx)
			return res, true, err
		}
		text := truncateMiddle(r.mask.Mask(obs.text), r.cfg.MaxObservation)
		if strings.TrimSpace(text) == "" {
			text = "[no output]"
		}
		r.msgs = append(r.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, Content: text, ToolCallID: tc.ID})
		if err := r.emit(ctx, Event{Kind: EventTool, Tool: tc.Function.Name, CallID: tc.ID, Args: tc.Function.Arguments,
			Content: text, IsError: obs.isError, DurationMS: time.Since(t0).Milliseconds()}); err != nil {
			return stop(StopEventLog, "the job log failed"), true, err
		}
		if r.hooks.OnStep != nil {
			step := Step{Iteration: r.iteration, Tool: tc.Function.Name, Args: clip(r.mask.Mask(tc.Function.Arguments), 200),
				Observation: clip(text, 200), IsError: obs.isError, FilesChanged: obs.filesChanged, Tasks: append([]TaskItem(nil), r.tasks...)}
			if err := r.hooks.OnStep(runCtx, step); err != nil {
				if errors.Is(err, context.Canceled) || ctx.Err() != nil {
					return stop(StopCancelled, "cancelled"), true, err
				}
				return stop(StopHook, r.mask.Mask(fmt.Sprintf("stopped by the runner: %v", err))), true, err
			}
		}
		if obs.finish {
			return Result{Finished: true, Message: finishMsg, Stop: StopFinished, Reason: "the agent called finish"}, true, nil
		}
		sig := tc.Function.Name + "\x00" + tc.Function.Arguments + "\x00" + text
		if sig == r.lastSig {
			r.repeats++
		} else {
			r.lastSig, r.repeats = sig, 1
		}
		if r.repeats >= r.cfg.StuckRepeats {
			if r.nudgedRepeat {
				return stop(StopStuck, fmt.Sprintf("stopped: the agent repeated the same %s call with the same result %d times", tc.Function.Name, r.repeats)), true, nil
			}
			r.nudgedRepeat = true
			nudge = fmt.Sprintf("You have run the same %s call %d times and got the same result each time. Do not repeat it: try a different approach, or call `finish` if you are done or cannot go on.", tc.Function.Name, r.repeats)
		}
	}
	if nudge != "" {
		if err := r.addNudge(ctx, nudge); err != nil {
			return stop(StopEventLog, "the job log failed"), true, err
		}
	}
	return Result{}, false, nil
}

// clip shortens s to n bytes on a rune boundary, adding "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
