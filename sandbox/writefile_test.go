package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gohands/gohands/sandbox"
)

// TestWriteFileKeepsMode: an editor rewrites files with mode 0, and an
// edited script must stay executable (a commit would show a mode change).
func TestWriteFileKeepsMode(t *testing.T) {
	forEachDriver(t, func(t *testing.T, start func(testing.TB, sandbox.Spec) sandbox.Sandbox) {
		ctx := context.Background()
		sb := start(t, sandbox.Spec{})
		if err := sb.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "run.sh", []byte("#!/bin/sh\necho two\n"), 0); err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "new.txt", []byte("x\n"), 0); err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.Command{Command: "./run.sh; stat -c '%a %n' run.sh new.txt"})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"two", "755 run.sh", "644 new.txt"} {
			if !strings.Contains(res.Output, want) {
				t.Errorf("output lacks %q:\n%s", want, res.Output)
			}
		}
	})
}
