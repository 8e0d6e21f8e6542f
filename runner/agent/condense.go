package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sashabaranov/go-openai"
)

// summaryPrefix starts the user message that replaces condensed steps.
const summaryPrefix = "Summary of the earlier work (older steps were condensed to fit the context window):\n\n"

const summarySystem = `You condense the history of a software agent's work so that it can go on without the full history.
Write a concise summary (at most 300 words) that keeps: every request from the user, the files changed and how,
the commands run with their important results and errors, what was learned about the code, and what remains to do.
Do not invent anything. Answer with the summary only.`

// summaryReserve is the room, in characters, left for the summary (about
// 300 words) when choosing how many recent turns to keep.
const summaryReserve = 2400

// messageChars approximates a message's size in characters.
func messageChars(m openai.ChatCompletionMessage) int {
	n := len(m.Content) + 16
	for _, tc := range m.ToolCalls {
		n += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments) + 32
	}
	return n
}

// estimate is the expected prompt tokens of the next request: the last
// reported prompt_tokens plus len/4 of what was added since, or len/4 of
// everything when no figure is known.
func (r *run) estimate() int {
	from, base := 0, 0
	if r.lastPrompt > 0 && r.sentLen <= len(r.msgs) {
		from, base = r.sentLen, r.lastPrompt
	}
	n := 0
	for _, m := range r.msgs[from:] {
		n += messageChars(m)
	}
	return base + n/4
}

// maybeCondense replaces the middle of the conversation by a summary when
// the next request nears the context window. It keeps the system prompt, the
// first user message and the last KeepLast model turns; a turn (an assistant
// message with its tool results) is never split.
func (r *run) maybeCondense(ctx context.Context) error {
	est := r.estimate()
	if float64(est) < condenseAt*float64(r.cfg.ContextWindow) {
		return nil
	}
	var turns []int
	for i := 2; i < len(r.msgs); i++ {
		if r.msgs[i].Role == openai.ChatMessageRoleAssistant {
			turns = append(turns, i)
		}
	}
	if len(turns) < 2 {
		return nil
	}
	// Keep the last KeepLast turns, or fewer (down to one) when even they
	// would not fit under the threshold with the summary.
	keep := min(r.cfg.KeepLast, len(turns)-1)
	budget := int(condenseAt * float64(r.cfg.ContextWindow))
	head := (messageChars(r.msgs[0]) + messageChars(r.msgs[1]) + summaryReserve) / 4
	for keep > 1 {
		tail := 0
		for _, m := range r.msgs[turns[len(turns)-keep]:] {
			tail += messageChars(m)
		}
		if head+tail/4 < budget {
			break
		}
		keep--
	}
	cut := turns[len(turns)-keep]
	middle := r.msgs[2:cut]
	started := time.Now()
	summary, how := r.summarize(ctx, middle)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	kept := make([]openai.ChatCompletionMessage, 0, 3+len(r.msgs)-cut)
	kept = append(kept, r.msgs[0], r.msgs[1], openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: summaryPrefix + r.mask.Mask(summary)})
	kept = append(kept, r.msgs[cut:]...)
	dropped := len(r.msgs) - len(kept) + 1
	r.msgs = kept
	r.lastPrompt, r.sentLen = 0, 0
	r.condensations++
	r.cfg.Logger.InfoContext(ctx, "condensed the conversation", "dropped_messages", dropped, "estimated_tokens", est, "summary", how)
	return r.emit(ctx, Event{Kind: EventCondense, Content: summary, Messages: dropped, EstimatedTokens: est,
		Reason: how, DurationMS: time.Since(started).Milliseconds()})
}

// summarize asks the model for a summary of msgs, without tools; if that
// fails it falls back to a mechanical list of the steps. how says which.
func (r *run) summarize(ctx context.Context, msgs []openai.ChatCompletionMessage) (summary, how string) {
	limit := r.cfg.ContextWindow * 2 // characters: about half the window
	history := truncateMiddle(render(msgs, 1500), limit)
	resp, err := r.llm.complete(ctx, openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: summarySystem},
		{Role: openai.ChatMessageRoleUser, Content: "The steps to summarize:\n\n" + history},
	}})
	if err == nil {
		r.promptTokens += resp.Usage.PromptTokens
		r.completionTokens += resp.Usage.CompletionTokens
		if s := strings.TrimSpace(resp.Choices[0].Message.Content); s != "" {
			return s, "model"
		}
		err = errEmptyAnswer
	}
	r.cfg.Logger.WarnContext(ctx, "summary request failed, using a mechanical summary", "err", err)
	return truncateMiddle(render(msgs, 160), 4000), "mechanical"
}

// render lists messages as text, each part clipped to n characters.
func render(msgs []openai.ChatCompletionMessage, n int) string {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case openai.ChatMessageRoleUser:
			fmt.Fprintf(&b, "- user: %s\n", clip(m.Content, max(n, 500)))
		case openai.ChatMessageRoleAssistant:
			if strings.TrimSpace(m.Content) != "" {
				fmt.Fprintf(&b, "- assistant: %s\n", clip(m.Content, n))
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(&b, "- called %s %s\n", tc.Function.Name, clip(tc.Function.Arguments, n))
			}
		case openai.ChatMessageRoleTool:
			fmt.Fprintf(&b, "  result: %s\n", strings.ReplaceAll(clip(m.Content, n), "\n", "\n    "))
		}
	}
	return b.String()
}

// truncateMiddle keeps the head and the tail of s within about n
// characters, with a marker saying how much was cut.
func truncateMiddle(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	head, tail := n/2, n-n/2
	for head > 0 && !utf8RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s\n[... %d characters cut ...]\n%s", s[:head], t-head, s[t:])
}
