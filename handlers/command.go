package handlers

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Action is what a comment asks of the bot.
type Action int

// The actions a comment can carry.
const (
	// ActionIgnore: the comment does not address the bot.
	ActionIgnore Action = iota
	// ActionWork: work on the issue or PR, with the comment as instruction.
	ActionWork
	// ActionStop: cancel the running job for this issue or PR.
	ActionStop
	// ActionReply: answer with Command.Reply and start nothing.
	ActionReply
)

// Command is the result of parsing a comment.
type Command struct {
	Action Action
	// Instruction is the comment's text with the mention removed (ActionWork).
	Instruction string
	// Reply is the text to answer with (ActionReply).
	Reply string
}

// Usage is the reply to "@bot help", a format taking the mention and the label.
const Usage = `I'm an AI coding agent. Ways to ask me for work:

- add the label ` + "`%[2]s`" + ` to an issue, or assign the issue to me;
- comment ` + "`%[1]s <what to do>`" + ` on an issue or a pull request;
- mention me in a review comment on a pull request to have me change that code.

Commands:

- ` + "`%[1]s stop`" + ` cancels the job running for this issue or pull request (what was pushed stays);
- ` + "`%[1]s help`" + ` shows this message.

Only people with write access to this repository can start work.`

// ParseComment reads a comment addressed to the bot whose mention is
// "@"+slug. Mentions count only as a whole word, in any case, outside quoted
// lines ("> …"), fenced code blocks and inline code. label is the trigger
// label, named in the help text.
func ParseComment(body, slug, label string) Command {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	idx, end := findMention(body, visibleMask(body), slug)
	if idx < 0 {
		return Command{Action: ActionIgnore}
	}
	mention := "@" + slug
	rest := strings.TrimSpace(body[end:])
	word, _, _ := strings.Cut(rest, " ")
	word = strings.ToLower(strings.TrimRight(strings.TrimSpace(firstLine(word)), ".!"))
	alone := strings.ToLower(strings.TrimSpace(strings.TrimRight(firstLine(rest), ".!"))) == word
	switch {
	case alone && (word == "stop" || word == "cancel"):
		return Command{Action: ActionStop}
	case alone && word == "help":
		return Command{Action: ActionReply, Reply: fmt.Sprintf(Usage, mention, label)}
	}
	// The instruction is the whole comment but the mention: code spans,
	// code blocks and quotes are part of what the person asks.
	before := strings.TrimRight(body[:idx], " \t")
	after := strings.TrimLeft(body[end:], " \t,:")
	sep := ""
	if before != "" && !strings.HasSuffix(before, "\n") && after != "" && !strings.HasPrefix(after, "\n") {
		sep = " "
	}
	instruction := strings.TrimSpace(before + sep + after)
	return Command{Action: ActionWork, Instruction: instruction}
}

// Mentions reports whether body addresses the bot (see ParseComment).
func Mentions(body, slug string) bool {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	idx, _ := findMention(body, visibleMask(body), slug)
	return idx >= 0
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// visibleMask marks the bytes of body where a mention counts: not in
// quoted lines ("> …"), fenced or indented code blocks, or inline code.
func visibleMask(body string) []bool {
	mask := make([]bool, len(body))
	fence := ""
	off := 0
	for line := range strings.SplitAfterSeq(body, "\n") {
		start := off
		off += len(line)
		text := strings.TrimSuffix(line, "\n")
		trimmed := strings.TrimLeft(text, " ")
		indent := len(text) - len(trimmed)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				fence = ""
			}
			continue
		}
		if indent < 4 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
			fence = strings.Repeat(trimmed[:1], n)
			continue
		}
		if indent >= 4 || strings.HasPrefix(trimmed, ">") {
			continue
		}
		for i := range len(text) {
			mask[start+i] = true
		}
		hideInlineCode(text, mask[start:start+len(text)])
	}
	return mask
}

// hideInlineCode clears the mask over `code` spans (any number of backticks).
func hideInlineCode(line string, mask []bool) {
	for pos := 0; pos < len(line); {
		i := strings.IndexByte(line[pos:], '`')
		if i < 0 {
			return
		}
		i += pos
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		ticks := line[i : i+n]
		j := strings.Index(line[i+n:], ticks)
		if j < 0 {
			return
		}
		end := i + n + j + n
		for k := i; k < end; k++ {
			mask[k] = false
		}
		pos = end
	}
}

// findMention returns the byte range of the first "@slug" (optionally
// followed by "[bot]") that stands as a whole word where mask says a
// mention counts, or -1.
func findMention(text string, mask []bool, slug string) (start, end int) {
	if slug == "" {
		return -1, -1
	}
	needle := "@" + slug
	for i := 0; i+len(needle) <= len(text); i++ {
		if text[i] != '@' || !mask[i] || !strings.EqualFold(text[i:i+len(needle)], needle) {
			continue
		}
		j := i + len(needle)
		if j+len("[bot]") <= len(text) && strings.EqualFold(text[j:j+len("[bot]")], "[bot]") {
			j += len("[bot]")
		}
		if !wordRune(lastRune(text[:i])) && !loginRune(firstRune(text[j:])) {
			return i, j
		}
	}
	return -1, -1
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// wordRune: a mention glued to a word before it (an e-mail address) is none.
func wordRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '@' || r == '/')
}

// loginRune: GitHub logins are letters, digits and hyphens.
func loginRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_')
}
