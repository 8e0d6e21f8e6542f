package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/sandbox/sandboxtest"
)

func TestTry(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	img := sandboxtest.MustImage(t)
	ctx := context.Background()
	t0 := time.Now()
	sb, err := d.Start(ctx, sandbox.Spec{Image: img, JobID: "try"})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("start", time.Since(t0))
	defer sb.Close(ctx)
	for _, c := range []sandbox.Command{{Command: "echo hi; cd /tmp; export A=1"}, {Command: "pwd; echo $A; false"}, {Command: "echo 'it''s'\nls /", Timeout: time.Second}, {Command: "sleep 5", Timeout: time.Second}, {Command: "echo after"}, {Command: "read -p 'name? ' x; echo hello $x", Timeout: time.Second}, {Command: "bob", IsInput: true}, {Command: "sleep 100 & echo bg"}, {Command: "echo $0"}} {
		t0 := time.Now()
		r, err := sb.Exec(ctx, c)
		t.Logf("%q -> %+v %v (%s)", c.Command, r, err, time.Since(t0))
	}
}
