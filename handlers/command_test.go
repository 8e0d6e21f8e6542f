package handlers

import (
	"strings"
	"testing"
)

func TestParseComment(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		want        Action
		instruction string
	}{
		{"plain ask", "@gohands fix the off-by-one in Sum", ActionWork, "fix the off-by-one in Sum"},
		{"mention mid-sentence", "Could @gohands add a test for this?", ActionWork, "Could add a test for this?"},
		{"case-insensitive", "@GoHands please rename Foo", ActionWork, "please rename Foo"},
		{"bot suffix", "@gohands[bot] do it", ActionWork, "do it"},
		{"bare mention works on the issue", "@gohands", ActionWork, ""},
		{"stop", "@gohands stop", ActionStop, ""},
		{"stop with punctuation", "@gohands Stop!", ActionStop, ""},
		{"cancel", "@gohands cancel", ActionStop, ""},
		{"stop as part of a sentence is work", "@gohands stop using the deprecated API", ActionWork, "stop using the deprecated API"},
		{"help", "@gohands help", ActionReply, ""},
		{"help in a sentence is work", "@gohands help me understand this function", ActionWork, "help me understand this function"},
		{"longer login is not us", "@gohands-dev fix it", ActionIgnore, ""},
		{"prefix login is not us", "@goh fix it", ActionIgnore, ""},
		{"e-mail address", "write to bob@gohands.dev", ActionIgnore, ""},
		{"no mention", "looks good to me", ActionIgnore, ""},
		{"quoted mention", "> @gohands fix it\n\nI agree with the above", ActionIgnore, ""},
		{"quoted and real", "> @gohands fix it\n@gohands yes, do that", ActionWork, "> @gohands fix it\nyes, do that"},
		{"fenced code", "```\n@gohands fix it\n```\nthat is how you'd call it", ActionIgnore, ""},
		{"tilde fence", "~~~sh\n@gohands x\n~~~", ActionIgnore, ""},
		{"after a fence", "```go\nx := 1\n```\n@gohands explain this", ActionWork, "```go\nx := 1\n```\nexplain this"},
		{"code spans are part of the ask", "@gohands rename `fooBar` to `foo_bar` in `pkg/x.go`", ActionWork, "rename `fooBar` to `foo_bar` in `pkg/x.go`"},
		{"a suggestion block is part of the ask", "@gohands apply this:\n```go\nreturn a - b\n```", ActionWork, "apply this:\n```go\nreturn a - b\n```"},
		{"dotted I", "İ @gohands fix", ActionWork, "İ fix"},
		{"unterminated fence hides the rest", "```\n@gohands fix", ActionIgnore, ""},
		{"inline code", "type `@gohands fix` to start", ActionIgnore, ""},
		{"double-backtick code", "use ``@gohands `x` `` here", ActionIgnore, ""},
		{"indented code", "example:\n\n    @gohands fix it", ActionIgnore, ""},
		{"CRLF", "@gohands stop\r\n", ActionStop, ""},
		{"in a path", "see docs/@gohands/readme", ActionIgnore, ""},
		{"unicode around", "héllo @gohands: fais-le", ActionWork, "héllo fais-le"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseComment(tt.body, "gohands", "gohands")
			if got.Action != tt.want {
				t.Fatalf("ParseComment(%q).Action = %v, want %v", tt.body, got.Action, tt.want)
			}
			if tt.want == ActionWork && got.Instruction != tt.instruction {
				t.Errorf("instruction = %q, want %q", got.Instruction, tt.instruction)
			}
			if tt.want == ActionReply && !strings.Contains(got.Reply, "@gohands stop") {
				t.Errorf("help reply does not explain stop: %q", got.Reply)
			}
			if Mentions(tt.body, "gohands") != (tt.want != ActionIgnore) {
				t.Errorf("Mentions disagrees with ParseComment")
			}
		})
	}
}

func FuzzParseComment(f *testing.F) {
	for _, s := range []string{"@gohands fix", "> @gohands\n```\n@gohands\n", "`@gohands` @gohands stop", "@gohands[bot]", "\xff@gohands"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c := ParseComment(body, "gohands", "gohands")
		if c.Action == ActionWork && strings.Contains(strings.ToLower(c.Instruction), "@gohands stop") && !strings.Contains(strings.ToLower(body), "@gohands stop") {
			t.Fatalf("instruction invented text: %q", c.Instruction)
		}
		if c.Action != ActionIgnore && !strings.Contains(strings.ToLower(body), "@gohands") {
			t.Fatalf("action %v without a mention in %q", c.Action, body)
		}
	})
}
