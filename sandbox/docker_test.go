package sandbox_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gohands/gohands/sandbox"
	"github.com/gohands/gohands/sandbox/sandboxtest"
)

func mustDockerSandbox(tb testing.TB, d *sandbox.Docker, spec sandbox.Spec) sandbox.Sandbox {
	tb.Helper()
	if spec.Image == "" {
		spec.Image = sandboxtest.MustImage(tb)
	}
	return mustStart(tb, d, spec)
}

// containers lists the containers carrying label=value, stopped ones included.
func containers(tb testing.TB, d *sandbox.Docker, label, value string) []container.Summary {
	tb.Helper()
	list, err := d.Client().ContainerList(context.Background(), container.ListOptions{
		// This driver's instance only: another test run may share the engine.
		All: true, Filters: filters.NewArgs(filters.Arg("label", label+"="+value), filters.Arg("label", sandbox.LabelInstance+"="+d.Instance())),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return list
}

func TestDockerLabelsAndLimits(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	sb := mustDockerSandbox(t, d, sandbox.Spec{JobID: "limits-job", CPUs: 0.5, MemoryBytes: 128 << 20, PidsLimit: 100, Labels: map[string]string{"team": "x"}})
	if !sb.Isolated() {
		t.Error("docker sandbox not isolated")
	}
	list := containers(t, d, sandbox.LabelJob, "limits-job")
	if len(list) != 1 {
		t.Fatalf("%d containers with the job label, want 1", len(list))
	}
	c := list[0]
	if c.Labels[sandbox.LabelInstance] != d.Instance() || c.Labels["team"] != "x" {
		t.Errorf("labels = %v", c.Labels)
	}
	insp, err := d.Client().ContainerInspect(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := insp.HostConfig
	if hc.NanoCPUs != 5e8 || hc.Memory != 128<<20 || hc.MemorySwap != 128<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 100 {
		t.Errorf("limits: cpus %d memory %d swap %d pids %v", hc.NanoCPUs, hc.Memory, hc.MemorySwap, hc.PidsLimit)
	}
	if res := run(t, sb, "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max"); strings.TrimSpace(res.Output) != "100" {
		t.Errorf("pids.max inside = %q", res.Output)
	}
}

func TestDockerForkBombEnds(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	sb := mustDockerSandbox(t, d, sandbox.Spec{JobID: "forkbomb", PidsLimit: 64})
	begin := time.Now()
	res, err := sb.Exec(context.Background(), sandbox.Command{Command: `bomb() { bomb | bomb & }; bomb; sleep 2; echo survived`, Timeout: 3 * time.Second})
	t.Logf("fork bomb: %.200q, err %v, after %s", res.Output, err, time.Since(begin))
	if err == nil && !res.TimedOut && res.ExitCode == 0 && strings.Contains(res.Output, "survived") && !strings.Contains(res.Output, "fork") {
		t.Errorf("the fork bomb looked like a success: %+v", res)
	}
	// Whatever the command's fate, the next one must come back too.
	res, err = sb.Exec(context.Background(), sandbox.Command{Command: "echo still here", Timeout: 3 * time.Second})
	t.Logf("after: %.200q, err %v", res.Output, err)
	if el := time.Since(begin); el > 90*time.Second {
		t.Errorf("the fork bomb held gohands for %s", el)
	}
	closeBegin := time.Now()
	if err := sb.Close(context.Background()); err != nil {
		t.Fatalf("close after fork bomb: %v", err)
	}
	if len(containers(t, d, sandbox.LabelJob, "forkbomb")) != 0 {
		t.Error("fork-bomb container left behind")
	}
	t.Logf("closed in %s", time.Since(closeBegin))
}

func TestDockerMemoryLimit(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	sb := mustDockerSandbox(t, d, sandbox.Spec{MemoryBytes: 64 << 20})
	res := run(t, sb, "dd if=/dev/zero of=/dev/null bs=256M count=1")
	if res.ExitCode == 0 {
		t.Fatalf("a 256 MB allocation under a 64 MB limit succeeded: %+v", res)
	}
	t.Logf("memory hog: exit %d, %q", res.ExitCode, res.Output)
	if res := run(t, sb, "echo alive"); res.Output != "alive\n" {
		t.Errorf("shell after the memory hog: %+v", res)
	}
}

func TestDockerNetworkNone(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	routes := func(network string) string {
		sb := mustDockerSandbox(t, d, sandbox.Spec{Network: network})
		return run(t, sb, "tail -n +2 /proc/net/route; ip -o link | grep -v ' lo:' | wc -l").Output
	}
	if out := routes("none"); strings.TrimSpace(out) != "0" {
		t.Errorf("network none has routes or links:\n%s", out)
	}
	if out := routes("bridge"); !strings.Contains(out, "eth0") {
		t.Errorf("network bridge has no route through eth0:\n%s", out)
	}
	if _, err := d.Start(context.Background(), sandbox.Spec{Image: sandboxtest.MustImage(t), Network: "host"}); err == nil || !strings.Contains(err.Error(), "bridge or none") {
		t.Errorf("network host: err = %v", err)
	}
}

func TestDockerCloseWithCancelledContext(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	sb := mustDockerSandbox(t, d, sandbox.Spec{JobID: "cancelled-job"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("close with a cancelled context: %v", err)
	}
	if n := len(containers(t, d, sandbox.LabelJob, "cancelled-job")); n != 0 {
		t.Errorf("%d containers left after Close", n)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDockerReapAfterCrash(t *testing.T) {
	crashed := sandboxtest.MustDocker(t)
	sb := mustDockerSandbox(t, crashed, sandbox.Spec{JobID: "crashed-job"})
	run(t, sb, "true")
	// A new gohands process with the same instance id starts and reaps.
	other := sandboxtest.MustDocker(t) // another instance: its reap must not touch ours
	if n, err := other.Reap(context.Background()); err != nil || n != 0 {
		t.Fatalf("reap of another instance removed %d (%v)", n, err)
	}
	next, err := sandbox.NewDocker(context.Background(), sandbox.DockerOptions{Instance: crashed.Instance()})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	n, err := next.Reap(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1", n, err)
	}
	if left := containers(t, crashed, sandbox.LabelInstance, crashed.Instance()); len(left) != 0 {
		t.Errorf("%d containers left after Reap", len(left))
	}
	if _, err := sb.Exec(context.Background(), sandbox.Command{Command: "true", Timeout: 5 * time.Second}); err == nil {
		t.Error("exec in a reaped sandbox succeeded")
	}
}

func TestDockerImageChecks(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	err := d.CheckImage(context.Background(), "gohands-no-such-image:0")
	if err == nil || !strings.Contains(err.Error(), sandbox.BuildImageCommand) {
		t.Errorf("CheckImage of a missing image: %v", err)
	}
	if err := d.CheckImage(context.Background(), sandboxtest.MustImage(t)); err != nil {
		t.Errorf("CheckImage of the test image: %v", err)
	}
	_, err = d.Start(context.Background(), sandbox.Spec{Image: "gohands-no-such-image:0"})
	if err == nil || !strings.Contains(err.Error(), sandbox.BuildImageCommand) {
		t.Errorf("Start with a missing image: %v", err)
	}
}

func TestNewDockerWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := sandbox.NewDocker(context.Background(), sandbox.DockerOptions{Instance: "x"})
	if err == nil || !strings.Contains(err.Error(), "no Docker engine answers") {
		t.Errorf("err = %v", err)
	}
	if _, err := sandbox.NewDocker(context.Background(), sandbox.DockerOptions{}); err == nil {
		t.Error("empty instance accepted")
	}
}

func TestShFallback(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	sb := mustDockerSandbox(t, d, sandbox.Spec{Image: sandboxtest.MustShImage(t)})
	if res := run(t, sb, "echo $0; command -v bash || echo no-bash"); res.Output != "sh\nno-bash\n" {
		t.Errorf("got %q", res.Output)
	}
}

func TestProcessDriverIsNotIsolated(t *testing.T) {
	p := mustProcess(t)
	sb := mustStart(t, p, sandbox.Spec{})
	if sb.Isolated() {
		t.Error("process sandbox claims isolation")
	}
	dir := sb.WorkDir()
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace left after Close: %v", err)
	}
}

// TestDefaultImage runs the real sandbox image when it has been built with
// deploy/sandbox/build.sh; building it takes minutes, so it is not required.
func TestDefaultImage(t *testing.T) {
	d := sandboxtest.MustDocker(t)
	const image = "gohands-sandbox:latest"
	if err := d.CheckImage(context.Background(), image); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI builds %s (.ci/run): %v", image, err)
		}
		t.Skipf("%v", err)
	}
	sb := mustDockerSandbox(t, d, sandbox.Spec{Image: image})
	res := run(t, sb, "echo $0 && git --version && python3 -c 'print(6*7)' && rg --version | head -1 && cc --version | head -1")
	if res.ExitCode != 0 || !strings.HasPrefix(res.Output, "bash\ngit version") || !strings.Contains(res.Output, "42\n") {
		t.Errorf("tools in %s: %+v", image, res)
	}
}

func TestProcessReapAfterCrash(t *testing.T) {
	base := t.TempDir()
	crashed, err := sandbox.NewProcess(sandbox.ProcessOptions{Instance: "crash", BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	sb := mustStart(t, crashed, sandbox.Spec{})
	run(t, sb, "sleep 300 &")
	next, err := sandbox.NewProcess(sandbox.ProcessOptions{Instance: "crash", BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := next.Reap(context.Background()); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(sb.WorkDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover directory not removed: %v", err)
	}
	if _, err := sb.Exec(context.Background(), sandbox.Command{Command: "true", Timeout: 5 * time.Second}); err == nil {
		t.Error("the reaped shell still answers")
	}
}
