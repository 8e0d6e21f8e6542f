package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// peerEnv names the configuration file of a peer server: when it is set,
// the test binary runs as that server instead of running tests.
const peerEnv = "GOHANDS_BENCH_PEER_CONFIG"

// peerProfileEnv, when set for a peer server, names a directory where it
// writes cpu.pprof and heap.pprof (allocations) of its whole run.
const peerProfileEnv = "GOHANDS_BENCH_PEER_PROFILE"

// peerMemPath is the peer server's extra endpoint, which reports its
// runtime.MemStats counters.
const peerMemPath = "/bench/memstats"

func TestMain(m *testing.M) {
	if path := os.Getenv(peerEnv); path != "" {
		if err := runPeer(path); err != nil {
			fmt.Fprintln(os.Stderr, "peer server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// peerMem is what the peer's peerMemPath answers.
type peerMem struct {
	TotalAlloc uint64
	Mallocs    uint64
	NumGC      uint32
	// Handled is how many webhooks the peer answered; HandlerNs is how
	// long its handler took for each, in order, from the first byte of
	// the request being read to the status being written.
	Handled   int
	HandlerNs []int64
}

// runPeer serves the real App's webhook handler, built from the JSON
// Config in path, on a loopback port that it prints as "listening ADDR",
// until its standard input closes. As in the benchmarks in this process,
// the queue is not run: what is measured is the answer to the webhook.
func runPeer(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New(context.Background(), cfg, Options{Logger: log, Instance: "bench"})
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		handled []int64
	)
	mux := http.NewServeMux()
	mux.HandleFunc(WebhookPath, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		a.Handler().ServeHTTP(w, r)
		d := time.Since(start)
		mu.Lock()
		handled = append(handled, int64(d))
		mu.Unlock()
	})
	mux.HandleFunc(peerMemPath, func(w http.ResponseWriter, _ *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		m := peerMem{TotalAlloc: ms.TotalAlloc, Mallocs: ms.Mallocs, NumGC: ms.NumGC, Handled: len(handled), HandlerNs: slices.Clone(handled)}
		mu.Unlock()
		json.NewEncoder(w).Encode(m)
	})
	if dir := os.Getenv(peerProfileEnv); dir != "" {
		stop, err := startProfiles(dir)
		if err != nil {
			return err
		}
		defer stop()
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Printf("listening %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// startProfiles starts a CPU profile in dir; the returned function stops
// it and writes the allocation profile beside it.
func startProfiles(dir string) (stop func(), err error) {
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		if heap, err := os.Create(filepath.Join(dir, "heap.pprof")); err == nil {
			pprof.Lookup("allocs").WriteTo(heap, 0)
			heap.Close()
		}
	}, nil
}

// peer is a webhook server in a child process (see runPeer).
type peer struct {
	url string // http://ADDR
}

// mustPeer starts the test binary as a peer server for cfg; it stops when
// the benchmark ends.
func mustPeer(b *testing.B, cfg Config) *peer {
	b.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "peer.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), peerEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("peer server: %v", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			b.Error("peer server did not stop")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		b.Fatalf("peer server did not start: %q, %v", line, err)
	}
	return &peer{url: "http://" + addr}
}

// mem reads the peer's allocation counters.
func (p *peer) mem(b *testing.B) peerMem {
	b.Helper()
	resp, err := http.Get(p.url + peerMemPath)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m peerMem
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		b.Fatal(err)
	}
	return m
}

// reportServer reports what the peer allocated per delivery between
// before and after, how many collections it ran, and the 99th percentile
// of its handler's time: the latency measured by the client less the
// loopback connection and the client's own scheduling.
func reportServer(b *testing.B, before, after peerMem) {
	n := float64(b.N)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "srv-B/op")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "srv-allocs/op")
	b.ReportMetric(float64(after.NumGC-before.NumGC), "srv-GCs")
	if ns := after.HandlerNs[before.Handled:]; len(ns) > 0 {
		slices.Sort(ns)
		b.ReportMetric(float64(ns[len(ns)*99/100])/1e3, "srv-p99-µs")
	}
}
