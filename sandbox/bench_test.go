package sandbox_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/sandbox/sandboxtest"
)

// BenchmarkDockerStart measures a sandbox start until its first command has
// run (container create and start, shell attach, `true`), then removal.
func BenchmarkDockerStart(b *testing.B) {
	d := sandboxtest.MustDocker(b)
	img := sandboxtest.MustImage(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		sb, err := d.Start(ctx, sandbox.Spec{Image: img, JobID: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Exec(ctx, sandbox.Command{Command: "true"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		sb.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkDockerRoundTrip compares `true` through the persistent shell with
// the same command in a fresh `docker exec`.
func BenchmarkDockerRoundTrip(b *testing.B) {
	d := sandboxtest.MustDocker(b)
	sb := mustStart(b, d, sandbox.Spec{Image: sandboxtest.MustImage(b)})
	ctx := context.Background()
	b.Run("persistent-shell", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if res, err := sb.Exec(ctx, sandbox.Command{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("docker-exec", func(b *testing.B) {
		once := sb.(interface {
			ExecOnce(context.Context, ...string) ([]byte, int, error)
		})
		for i := 0; i < b.N; i++ {
			if _, code, err := once.ExecOnce(ctx, "true"); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
	})
}

// mustBigTree writes files×size bytes of random content under a new directory.
func mustBigTree(tb testing.TB, files, size int) string {
	tb.Helper()
	dir := tb.TempDir()
	buf := make([]byte, size)
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("d%02d/f%04d.bin", i%50, i))
		if i < 50 {
			os.MkdirAll(filepath.Dir(p), 0o755)
		}
		rand.Read(buf)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// BenchmarkDockerCopy50MB copies a 50 MB, 5,000-file tree in, changes 100
// files inside, and copies the workspace back out over the original.
func BenchmarkDockerCopy50MB(b *testing.B) {
	d := sandboxtest.MustDocker(b)
	src := mustBigTree(b, 5000, 10*1024)
	sb := mustStart(b, d, sandbox.Spec{Image: sandboxtest.MustImage(b)})
	ctx := context.Background()
	b.Run("in", func(b *testing.B) {
		b.SetBytes(50 * 1024 * 1024)
		for i := 0; i < b.N; i++ {
			if err := sb.CopyIn(ctx, src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("changes-out", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			res := run(b, sb, fmt.Sprintf("for f in d0*/f00[0-9]*.bin; do echo %d >> $f; done; echo new > new-%d.txt; rm -f d49/f4999.bin", i, i))
			if res.ExitCode != 0 {
				b.Fatal(res)
			}
			b.StartTimer()
			if err := sb.CopyOut(ctx, src); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkProcessRoundTrip is `true` through the process driver's shell.
func BenchmarkProcessRoundTrip(b *testing.B) {
	sb := mustStart(b, mustProcess(b), sandbox.Spec{})
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := sb.Exec(ctx, sandbox.Command{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
