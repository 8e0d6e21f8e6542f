package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchNumber stands for the issue number in the benchmark's payload
// template; each delivery puts a fresh number in its place.
const benchNumber = "987654321"

// benchServer is the real App's webhook handler in a server of its own
// process (see runPeer), with its store on disk, against the GitHub
// emulator in this process: as in production, where GitHub is elsewhere,
// the emulator's and the load generator's work are not the server's. The
// queue is not run: the benchmarks measure webhook handling (signature,
// decode, permission call, durable enqueue, 👀). Each delivery is a comment
// on a fresh issue number, so each one writes a new job, as most real
// deliveries do.
type benchServer struct {
	peer   *peer
	url    string
	client *http.Client
	secret string
	body   []byte // an issue_comment payload with benchNumber for the issue
	next   atomic.Int64
}

func mustBenchServer(b *testing.B) *benchServer {
	b.Helper()
	dir := b.TempDir()
	w, err := startWorld(dir)
	if err != nil {
		b.Fatalf("start world: %v", err)
	}
	b.Cleanup(w.close)
	cfg := w.config(filepath.Join(dir, "data"))
	cfg.Sandbox.Driver = "process"
	p := mustPeer(b, cfg)
	s := &benchServer{
		peer:   p,
		url:    p.url + WebhookPath,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}},
		secret: w.gh.WebhookSecret,
	}
	b.Cleanup(s.client.CloseIdleConnections)
	h := &harness{t: b, w: w}
	// The 👀 goes on this comment whatever the issue number says: the
	// reactions endpoint names the comment only.
	body, _ := h.issueComment(w.issue, sampleUser, "@gohands fix the off-by-one in Sum", func(m map[string]any) {
		set(m, "issue.number", json.Number(benchNumber))
	})
	if bytes.Count(body, []byte(benchNumber)) != 1 {
		b.Fatalf("payload template has %d issue numbers", bytes.Count(body, []byte(benchNumber)))
	}
	s.body = body
	return s
}

// delivery is one signed webhook, made before the clock starts.
type delivery struct {
	id, signature string
	body          []byte
}

// deliveries makes n signed issue_comment deliveries, each on a new issue.
func (s *benchServer) deliveries(n int) []delivery {
	ds := make([]delivery, n)
	for i := range ds {
		id := s.next.Add(1)
		body := bytes.Replace(s.body, []byte(benchNumber), strconv.AppendInt(nil, id, 10), 1)
		ds[i] = delivery{id: "bench-" + strconv.FormatInt(id, 10), signature: signBody(s.secret, body), body: body}
	}
	return ds
}

// deliver posts one delivery and fails unless it is answered 202.
func (s *benchServer) deliver(d delivery) error {
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(d.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", d.id)
	req.Header.Set("X-Hub-Signature-256", d.signature)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d, want 202", resp.StatusCode)
	}
	return nil
}

// BenchmarkWebhook posts signed issue_comment deliveries from parallel
// clients as fast as they are answered: ns/op is the server's throughput
// cost per delivery, and the percentiles are the latency under that load.
func BenchmarkWebhook(b *testing.B) {
	s := mustBenchServer(b)
	ds := s.deliveries(b.N)
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	before := s.peer.mem(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			d := ds[next.Add(1)-1]
			start := time.Now()
			err := s.deliver(d)
			mine = append(mine, time.Since(start))
			if err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportServer(b, before, s.peer.mem(b))
	reportLatency(b, lat)
}

// BenchmarkWebhookAt500PerSecond sends b.N signed issue_comment deliveries
// at a steady 500 per second (open loop: a slow answer does not slow the
// sender), each on a new issue, and reports the latency percentiles of the
// 202. Run it with a fixed count, such as -benchtime 5000x (10 s).
func BenchmarkWebhookAt500PerSecond(b *testing.B) { benchWebhookAt(b, 500) }

// BenchmarkWebhookAt50PerSecond is the same at 50 per second: the latency
// of one delivery when deliveries do not compete with each other for the
// CPU. Run it with -benchtime 500x.
func BenchmarkWebhookAt50PerSecond(b *testing.B) { benchWebhookAt(b, 50) }

func benchWebhookAt(b *testing.B, perSecond int) {
	s := mustBenchServer(b)
	ds := s.deliveries(b.N)
	lat := make([]time.Duration, b.N)
	before := s.peer.mem(b)
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Go(func() {
			start := time.Now()
			err := s.deliver(ds[i])
			lat[i] = time.Since(start)
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportServer(b, before, s.peer.mem(b))
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// maxIdleRSS is the most resident memory an idle `gohands serve` may use.
const maxIdleRSS = 40 << 20

// TestIdleServerRSS builds the gohands binary, runs `gohands serve` against
// the offline world with a config file, and reads the process's VmRSS from
// /proc once /healthz answers and the server has been idle for a second.
func TestIdleServerRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this system")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gohands")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gohands")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	w, err := startWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	addr := mustFreeAddr(t)
	config := fmt.Sprintf(`server:
  address: %q
github:
  web_url: %q
  v3_api_url: %q
  app:
    integration_id: %d
    webhook_secret: "${GOHANDS_TEST_WEBHOOK_SECRET}"
    private_key: "${GOHANDS_TEST_PRIVATE_KEY}"
llm:
  base_url: %q
  api_key: "${GOHANDS_TEST_LLM_KEY}"
  model: replay
sandbox:
  driver: process
store:
  path: %q
`, addr, w.gh.URL, w.gh.URL+"/", w.gh.AppID, w.llm.URL(), filepath.Join(dir, "data"))
	cfgPath := mustFile(t, "config.yml", []byte(config), 0o600)

	var stderr logSink
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Env = append(os.Environ(),
		"GOHANDS_TEST_WEBHOOK_SECRET="+w.gh.WebhookSecret,
		"GOHANDS_TEST_PRIVATE_KEY="+string(w.gh.PrivateKeyPEM),
		"GOHANDS_TEST_LLM_KEY=not-a-secret")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("gohands serve log:\n%s", stderr.String())
		}
	})
	waitFor(t, "/healthz to answer 200", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("gohands serve exited: %v\n%s", err, stderr.String())
		default:
		}
		resp, err := http.Get("http://" + addr + HealthPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	time.Sleep(time.Second)
	rss, hwm := mustProcMem(t, cmd.Process.Pid)
	t.Logf("idle gohands serve: VmRSS %.1f MB, VmHWM %.1f MB (limit %d MB)", float64(rss)/(1<<20), float64(hwm)/(1<<20), maxIdleRSS>>20)
	if rss > maxIdleRSS {
		t.Errorf("idle VmRSS %d bytes, want under %d", rss, maxIdleRSS)
	}
}

// mustFreeAddr returns a loopback address with a port nobody listens on.
func mustFreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// mustProcMem reads VmRSS and VmHWM (peak RSS) of a process, in bytes.
func mustProcMem(tb testing.TB, pid int) (rss, hwm int64) {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			tb.Fatalf("%s: %v", line, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if rss == 0 {
		tb.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	return rss, hwm
}
