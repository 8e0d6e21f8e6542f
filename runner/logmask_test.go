package runner

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestMaskLogger(t *testing.T) {
	const secret = "ghs_supersecret0123456789"
	var buf bytes.Buffer
	log := MaskLogger(slog.New(slog.NewTextHandler(&buf, nil)), secret)
	log = log.With("token", secret)
	log.WithGroup("g").Info("clone with "+secret,
		"err", errors.New("auth failed for "+secret),
		"url", "https://x-access-token:"+secret+"@github.com/o/r",
		slog.Group("inner", "v", secret),
		"n", 3,
	)
	out := buf.String()
	if strings.Contains(out, "supersecret") {
		t.Fatalf("secret in log: %s", out)
	}
	for _, want := range []string{"clone with ***", "auth failed for ***", "n=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q: %s", want, out)
		}
	}
}
