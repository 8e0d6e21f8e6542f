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
	text := visibleText(body)
	idx, end := findMention(text, slug)
	if idx < 0 {
		return Command{Action: ActionIgnore}
	}
	mention := "@" + slug
	rest := strings.TrimSpace(text[end:])
	word, _, _ := strings.Cut(rest, " ")
	word = strings.ToLower(strings.TrimRight(strings.TrimSpace(firstLine(word)), ".!"))
	alone := strings.ToLower(strings.TrimSpace(strings.TrimRight(firstLine(rest), ".!"))) == word
	switch {
	case alone && (word == "stop" || word == "cancel"):
		return Command{Action: ActionStop}
	case alone && word == "help":
		return Command{Action: ActionReply, Reply: fmt.Sprintf(Usage, mention, label)}
	}
	instruction := strings.TrimSpace(text[:idx] + text[end:])
	return Command{Action: ActionWork, Instruction: instruction}
}

// Mentions reports whether body addresses the bot (see ParseComment).
func Mentions(body, slug string) bool {
	idx, _ := findMention(visibleText(body), slug)
	return idx >= 0
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// visibleText drops quoted lines and code (fenced blocks, indented blocks
// and inline spans), where a mention is a quotation, not an ask.
func visibleText(body string) string {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	var b strings.Builder
	fence := ""
	for line := range strings.SplitSeq(body, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
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
		b.WriteString(stripInlineCode(line))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// stripInlineCode removes `code` spans (any number of backticks).
func stripInlineCode(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		ticks := line[i : i+n]
		j := strings.Index(line[i+n:], ticks)
		if j < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		line = line[i+n+j+n:]
	}
}

// findMention returns the byte range of the first "@slug" (optionally
// followed by "[bot]") that stands as a whole word, or -1.
func findMention(text, slug string) (start, end int) {
	if slug == "" {
		return -1, -1
	}
	lower := strings.ToLower(text)
	needle := "@" + strings.ToLower(slug)
	for off := 0; ; {
		i := strings.Index(lower[off:], needle)
		if i < 0 {
			return -1, -1
		}
		i += off
		j := i + len(needle)
		if strings.HasPrefix(lower[j:], "[bot]") {
			j += len("[bot]")
		}
		if !wordRune(lastRune(text[:i])) && !loginRune(firstRune(text[j:])) {
			return i, j
		}
		off = i + 1
	}
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
