package sandbox

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCapper(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"empty", 10, nil, ""},
		{"short", 10, []string{"abc"}, "abc"},
		{"exact", 10, []string{"0123456789"}, "0123456789"},
		{"cut", 10, []string{"0123456789", "abcdef"}, "01234\n[... 6 characters cut ...]\nbcdef"},
		{"many small writes", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "abc\n[... 2 characters cut ...]\nfgh"},
		{"one big write", 4, []string{strings.Repeat("x", 100) + "yz"}, "xx\n[... 98 characters cut ...]\nyz"},
	} {
		c := &capper{max: tc.max}
		for _, w := range tc.writes {
			c.Write([]byte(w))
		}
		if got := c.String(); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestWrapCommandQuoting runs the wrapped line through a real sh and checks
// that the text arrives unchanged.
func TestWrapCommandQuoting(t *testing.T) {
	for _, text := range []string{
		`echo 'single' "double" $HOME \$HOME`,
		"printf '%s\\n' one\nprintf '%s\\n' two",
		"echo " + strings.Repeat("ab'c", 1000),
		"cat <<'EOF'\nheredoc 'x' $y\nEOF",
		"",
	} {
		script := wrapCommand("printf %s "+shellQuote(text), 7)
		out, err := exec.Command("sh", "-c", script+"echo; echo seq=$__gh_seq").CombinedOutput()
		if err != nil {
			t.Fatalf("%.30q: %v: %s", text, err, out)
		}
		if want := text + "\nseq=7\n"; string(out) != want {
			t.Errorf("%.30q: got %.80q, want %.80q", text, out, want)
		}
		for _, line := range strings.Split(script, "\n") {
			if len(line) > 4000 {
				t.Errorf("a line of %d bytes would overflow the terminal", len(line))
			}
		}
	}
}
