package agent

import (
	"context"
	"time"
)

// Event kinds written to the EventLog.
const (
	EventSystem    = "system"    // the system prompt
	EventUser      = "user"      // a user message (the task, a nudge, a later message)
	EventRequest   = "request"   // a request to the model is about to be sent
	EventAssistant = "assistant" // the model's answer (text and tool calls)
	EventTool      = "tool"      // a tool call and its observation
	EventCondense  = "condense"  // older steps were replaced by a summary
	EventRetry     = "retry"     // a model request failed and will be retried
	EventStop      = "stop"      // the loop ended
)

// Event is one entry of a job's log. Every string is masked before it is
// appended. A conversation can be replayed from the system, user, assistant
// and tool events in order.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Iteration int       `json:"iteration"`
	// Content is the message text, the observation, or the summary.
	Content string `json:"content,omitempty"`
	// Tool, CallID and Args describe a tool call (tool events) and ToolCalls
	// lists the calls of an assistant message.
	Tool      string     `json:"tool,omitempty"`
	CallID    string     `json:"call_id,omitempty"`
	Args      string     `json:"args,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// IsError marks an error observation or a failed request.
	IsError bool   `json:"is_error,omitempty"`
	Error   string `json:"error,omitempty"`
	// Messages and EstimatedTokens summarise a request; PromptTokens and
	// CompletionTokens are the usage the API reported for an answer.
	Messages         int `json:"messages,omitempty"`
	EstimatedTokens  int `json:"estimated_tokens,omitempty"`
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
	// DurationMS is how long the request, tool call or job took.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Stop and Reason are set on the stop event.
	Stop   string `json:"stop,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ToolCall is one tool call of an assistant message, as logged.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// EventLog receives the job's events in order; the runner's store implements it.
type EventLog interface {
	Append(ctx context.Context, e Event) error
}
