package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const testTimeout = 10 * time.Second

// fakeExec is an Executor whose jobs block until the test finishes them,
// and which records how many ran at once, overall and per key.
type fakeExec struct {
	started chan *Job

	mu       sync.Mutex
	results  map[string]chan error
	perKey   map[string]int
	total    int
	maxTotal int
	overlap  []string // keys that ran twice at once
	causes   map[string]error
	pr       int // set on every job as its pull request
}

func newFakeExec() *fakeExec {
	return &fakeExec{
		started: make(chan *Job, 128),
		results: make(map[string]chan error),
		perKey:  make(map[string]int),
		causes:  make(map[string]error),
	}
}

func (e *fakeExec) result(id string) chan error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.results[id]
	if ch == nil {
		ch = make(chan error, 1)
		e.results[id] = ch
	}
	return ch
}

func (e *fakeExec) Execute(ctx context.Context, job *Job) error {
	ch := e.result(job.ID)
	kid := keyID(job.Key)
	e.mu.Lock()
	e.perKey[kid]++
	if e.perKey[kid] > 1 {
		e.overlap = append(e.overlap, kid)
	}
	e.total++
	e.maxTotal = max(e.maxTotal, e.total)
	job.PullRequest = e.pr
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.perKey[kid]--
		e.total--
		e.mu.Unlock()
	}()
	c := *job
	e.started <- &c
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		e.mu.Lock()
		e.causes[job.ID] = context.Cause(ctx)
		e.mu.Unlock()
		return fmt.Errorf("stopped: %w", context.Cause(ctx))
	}
}

// finish lets the job return err (now, or as soon as it starts).
func (e *fakeExec) finish(id string, err error) { e.result(id) <- err }

func (e *fakeExec) cause(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.causes[id]
}

func (e *fakeExec) stats() (maxTotal int, overlap []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxTotal, slices.Clone(e.overlap)
}

// mustStarted waits for the next job to start.
func (e *fakeExec) mustStarted(tb testing.TB) *Job {
	tb.Helper()
	select {
	case job := <-e.started:
		return job
	case <-time.After(testTimeout):
		tb.Fatal("no job started")
		return nil
	}
}

// mustNotStart checks that no job starts for a while.
func (e *fakeExec) mustNotStart(tb testing.TB) {
	tb.Helper()
	select {
	case job := <-e.started:
		tb.Fatalf("job %s for %s started; want none", job.ID, job.Key)
	case <-time.After(100 * time.Millisecond):
	}
}

func testLogger(tb testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func mustStore(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := OpenStore(dir)
	if err != nil {
		tb.Fatalf("OpenStore: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustQueue(tb testing.TB, s *Store, exec Executor, workers int) *Queue {
	tb.Helper()
	return NewQueue(s, exec, QueueOptions{Workers: workers, Logger: testLogger(tb)})
}

// mustRun runs q until the returned stop is called or the test ends; stop
// returns once Run has returned.
func mustRun(tb testing.TB, q *Queue) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("Run: %v", err)
				}
			case <-time.After(testTimeout):
				tb.Errorf("Run did not return after its context was cancelled")
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

func mustEnqueue(tb testing.TB, q *Queue, r Request) Enqueued {
	tb.Helper()
	res, err := q.Enqueue(context.Background(), r)
	if err != nil {
		tb.Fatalf("Enqueue(%s, %q): %v", r.Key, r.DeliveryID, err)
	}
	return res
}

func mustWait(tb testing.TB, q *Queue, id string) *Job {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	job, err := q.Wait(ctx, id)
	if err != nil {
		tb.Fatalf("Wait(%s): %v", id, err)
	}
	return job
}

func key(n int) Key { return Key{Owner: "octo", Repo: "hello", Number: n} }

func req(k Key, delivery, instruction string) Request {
	return Request{Key: k, DeliveryID: delivery, Trigger: TriggerComment, Requester: "alice", Instruction: instruction}
}

func instructions(job *Job) []string {
	var out []string
	for _, r := range job.Requests {
		out = append(out, r.Instruction)
	}
	return out
}

func TestQueueRunsJobToSuccess(t *testing.T) {
	s := mustStore(t, t.TempDir())
	e := newFakeExec()
	e.pr = 42
	var mu sync.Mutex
	var events []State
	q := NewQueue(s, e, QueueOptions{Workers: 2, Logger: testLogger(t), Notify: func(ev Event) {
		mu.Lock()
		events = append(events, ev.Job.State)
		mu.Unlock()
	}})
	before := time.Now()
	res := mustEnqueue(t, q, req(key(1), "d1", "fix it"))
	if res.Duplicate || res.Coalesced || res.Behind != nil {
		t.Fatalf("Enqueue = %+v; want a new job with nothing ahead", res)
	}
	if res.Job.State != StateQueued || res.Job.ID == "" {
		t.Fatalf("new job = %+v; want queued with an ID", res.Job)
	}
	mustRun(t, q)
	started := e.mustStarted(t)
	if started.ID != res.Job.ID || started.Attempts != 1 || started.State != StateRunning {
		t.Fatalf("started %+v; want job %s, attempt 1, running", started, res.Job.ID)
	}
	e.finish(started.ID, nil)
	job := mustWait(t, q, res.Job.ID)
	if job.State != StateSucceeded || job.Reason != "" || job.Attempts != 1 || job.PullRequest != 42 {
		t.Fatalf("job = %+v; want succeeded, attempt 1, PR 42", job)
	}
	if job.CreatedAt.Before(before.Add(-time.Second)) || job.StartedAt.Before(job.CreatedAt) || job.FinishedAt.Before(job.StartedAt) {
		t.Fatalf("timestamps created %v started %v finished %v; want set and ordered", job.CreatedAt, job.StartedAt, job.FinishedAt)
	}
	if job.Requests[0].ReceivedAt.IsZero() {
		t.Error("request ReceivedAt not set")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []State{StateQueued, StateRunning, StateSucceeded}; !slices.Equal(events, want) {
		t.Errorf("notified states %v; want %v", events, want)
	}
}

func TestQueueWorkerLimitAndParallelKeys(t *testing.T) {
	s := mustStore(t, t.TempDir())
	e := newFakeExec()
	q := mustQueue(t, s, e, 2)
	var ids []string
	for n := 1; n <= 5; n++ {
		ids = append(ids, mustEnqueue(t, q, req(key(n), fmt.Sprint("d", n), "")).Job.ID)
	}
	mustRun(t, q)
	a, b := e.mustStarted(t), e.mustStarted(t)
	// Oldest first: jobs 1 and 2 run in parallel, the rest wait.
	if got := []string{a.ID, b.ID}; !slices.Contains(got, ids[0]) || !slices.Contains(got, ids[1]) {
		t.Fatalf("first started %v; want %v", got, ids[:2])
	}
	e.mustNotStart(t)
	for _, id := range ids {
		e.finish(id, nil)
	}
	for range 3 {
		e.mustStarted(t)
	}
	for _, id := range ids {
		if job := mustWait(t, q, id); job.State != StateSucceeded {
			t.Errorf("job %s: %s; want succeeded", id, job.State)
		}
	}
	if maxTotal, _ := e.stats(); maxTotal != 2 {
		t.Errorf("at most %d jobs ran at once; want exactly 2", maxTotal)
	}
}

func TestQueueCoalescesWhileRunning(t *testing.T) {
	s := mustStore(t, t.TempDir())
	e := newFakeExec()
	q := mustQueue(t, s, e, 4)
	mustRun(t, q)
	first := mustEnqueue(t, q, req(key(7), "d0", "start"))
	running := e.mustStarted(t)

	var follow []Enqueued
	for i := 1; i <= 3; i++ {
		follow = append(follow, mustEnqueue(t, q, req(key(7), fmt.Sprint("d", i), fmt.Sprint("ask ", i))))
	}
	// Another key is not held up by the busy one.
	other := mustEnqueue(t, q, req(key(8), "d8", "other"))
	if got := e.mustStarted(t); got.ID != other.Job.ID {
		t.Fatalf("started %s; want the other key's job %s", got.ID, other.Job.ID)
	}
	e.finish(other.Job.ID, nil)

	if follow[0].Coalesced || follow[0].Behind == nil || follow[0].Behind.ID != running.ID {
		t.Fatalf("first follow-up = %+v; want a new job behind %s", follow[0], running.ID)
	}
	for _, f := range follow[1:] {
		if !f.Coalesced || f.Job.ID != follow[0].Job.ID || f.Behind == nil || f.Behind.ID != first.Job.ID {
			t.Fatalf("later follow-up = %+v; want coalesced into %s behind %s", f, follow[0].Job.ID, first.Job.ID)
		}
	}
	e.mustNotStart(t) // the follow-up waits for the running job

	e.finish(running.ID, nil)
	next := e.mustStarted(t)
	if next.ID != follow[0].Job.ID {
		t.Fatalf("started %s; want follow-up %s", next.ID, follow[0].Job.ID)
	}
	if got, want := instructions(next), []string{"ask 1", "ask 2", "ask 3"}; !slices.Equal(got, want) {
		t.Fatalf("follow-up instructions %q; want %q", got, want)
	}
	e.finish(next.ID, nil)
	mustWait(t, q, next.ID)

	jobs, err := q.Jobs(key(7))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != first.Job.ID || jobs[1].ID != next.ID {
		t.Fatalf("Jobs(key 7) = %d jobs; want the first and one follow-up", len(jobs))
	}
	if _, overlap := e.stats(); len(overlap) > 0 {
		t.Errorf("keys ran twice at once: %v", overlap)
	}
}

func TestQueueCoalescesIntoQueuedJob(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, newFakeExec(), 1)
	a := mustEnqueue(t, q, req(key(1), "d1", "one"))
	b := mustEnqueue(t, q, req(Key{Owner: "Octo", Repo: "Hello", Number: 1}, "d2", "two"))
	if !b.Coalesced || b.Job.ID != a.Job.ID || b.Behind != nil {
		t.Fatalf("second request = %+v; want coalesced into %s (keys differ only in case), nothing running", b, a.Job.ID)
	}
	job, err := q.Job(a.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := instructions(job); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("instructions %q; want [one two]", got)
	}
}

func TestQueueSameKeyNeverTwiceUnderLoad(t *testing.T) {
	s := mustStore(t, t.TempDir())
	e := newFakeExec()
	q := mustQueue(t, s, e, 4)
	mustRun(t, q)
	// Finish every job as soon as it starts, while requests keep arriving
	// from several goroutines for three keys.
	done := make(chan struct{})
	go func() {
		for {
			select {
			case job := <-e.started:
				e.finish(job.ID, nil)
			case <-done:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for g := range 6 {
		wg.Go(func() {
			for i := range 20 {
				res, err := q.Enqueue(context.Background(), req(key(1+i%3), fmt.Sprintf("g%d-%d", g, i), ""))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, res.Job.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		mustWait(t, q, id)
	}
	close(done)
	total := 0
	for n := 1; n <= 3; n++ {
		jobs, err := q.Jobs(key(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.State != StateSucceeded {
				t.Errorf("job %s: %s; want succeeded", j.ID, j.State)
			}
			total += len(j.Requests)
		}
	}
	if total != 120 {
		t.Errorf("%d requests in jobs; want 120 (none lost, none doubled)", total)
	}
	if maxTotal, overlap := e.stats(); len(overlap) > 0 || maxTotal > 3 {
		t.Errorf("overlapping keys %v, %d at once; want none and at most 3", overlap, maxTotal)
	}
}

func TestQueueDeduplicatesDeliveries(t *testing.T) {
	dir := t.TempDir()
	s := mustStore(t, dir)
	q := mustQueue(t, s, newFakeExec(), 1)
	first := mustEnqueue(t, q, req(key(1), "same", "one"))
	dup := mustEnqueue(t, q, req(key(1), "same", "again"))
	if !dup.Duplicate || dup.Job == nil || dup.Job.ID != first.Job.ID {
		t.Fatalf("redelivery = %+v; want duplicate of %s", dup, first.Job.ID)
	}
	// Empty delivery IDs are never de-duplicated.
	for range 2 {
		if res := mustEnqueue(t, q, req(key(1), "", "no id")); res.Duplicate {
			t.Fatal("request without delivery ID treated as duplicate")
		}
	}
	job, err := q.Job(first.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := instructions(job); !slices.Equal(got, []string{"one", "no id", "no id"}) {
		t.Fatalf("instructions %q; want the duplicate left out", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Across a restart.
	s2 := mustStore(t, dir)
	q2 := mustQueue(t, s2, newFakeExec(), 1)
	if res := mustEnqueue(t, q2, req(key(1), "same", "after restart")); !res.Duplicate {
		t.Fatalf("redelivery after restart = %+v; want duplicate", res)
	}
	// Pruned deliveries are forgotten.
	n, err := s2.PruneDeliveries(context.Background(), time.Now().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PruneDeliveries = %d, %v; want 1 removed", n, err)
	}
	if res := mustEnqueue(t, q2, req(key(1), "same", "after prune")); res.Duplicate {
		t.Fatal("pruned delivery still treated as duplicate")
	}
}

func TestQueueCancelRunningAndQueued(t *testing.T) {
	s := mustStore(t, t.TempDir())
	e := newFakeExec()
	q := mustQueue(t, s, e, 2)
	mustRun(t, q)
	running := mustEnqueue(t, q, req(key(1), "d1", "one"))
	e.mustStarted(t)
	follow := mustEnqueue(t, q, req(key(1), "d2", "two"))

	ok, err := q.Cancel(context.Background(), Key{Owner: "OCTO", Repo: "hello", Number: 1}, "alice")
	if err != nil || !ok {
		t.Fatalf("Cancel = %v, %v; want true", ok, err)
	}
	for _, id := range []string{running.Job.ID, follow.Job.ID} {
		job := mustWait(t, q, id)
		if job.State != StateCancelled || job.Reason != "cancelled by alice" || job.FinishedAt.IsZero() {
			t.Errorf("job %s = %s %q finished %v; want cancelled by alice, with a time", id, job.State, job.Reason, job.FinishedAt)
		}
	}
	var ce *CancelledError
	if cause := e.cause(running.Job.ID); !errors.As(cause, &ce) || ce.By != "alice" {
		t.Errorf("executor saw cause %v; want *CancelledError by alice", cause)
	}
	e.mustNotStart(t) // the cancelled follow-up never runs

	ok, err = q.Cancel(context.Background(), key(1), "alice")
	if err != nil || ok {
		t.Fatalf("Cancel with nothing to cancel = %v, %v; want false", ok, err)
	}
	// A new request after the cancel starts a new job.
	again := mustEnqueue(t, q, req(key(1), "d3", "three"))
	if again.Coalesced || again.Job.ID == follow.Job.ID {
		t.Fatalf("request after cancel = %+v; want a new job", again)
	}
	e.finish(e.mustStarted(t).ID, nil)
	if job := mustWait(t, q, again.Job.ID); job.State != StateSucceeded {
		t.Fatalf("job after cancel: %s; want succeeded", job.State)
	}
}

func TestQueueCancelQueuedWithoutRun(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, newFakeExec(), 1)
	res := mustEnqueue(t, q, req(key(3), "d1", ""))
	if ok, err := q.Cancel(context.Background(), key(3), "bob"); err != nil || !ok {
		t.Fatalf("Cancel = %v, %v; want true", ok, err)
	}
	job := mustWait(t, q, res.Job.ID)
	if job.State != StateCancelled || job.Reason != "cancelled by bob" {
		t.Fatalf("job = %s %q; want cancelled by bob", job.State, job.Reason)
	}
}

func TestQueueFailureReasons(t *testing.T) {
	tests := []struct {
		name   string
		exec   ExecutorFunc
		reason string
	}{
		{"error", func(context.Context, *Job) error { return errors.New("clone octo/hello: repository not found") },
			"clone octo/hello: repository not found"},
		{"panic", func(context.Context, *Job) error { panic("boom") }, "internal error: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustStore(t, t.TempDir())
			q := mustQueue(t, s, tt.exec, 1)
			mustRun(t, q)
			res := mustEnqueue(t, q, req(key(1), "d1", ""))
			job := mustWait(t, q, res.Job.ID)
			if job.State != StateFailed || job.Reason != tt.reason || job.FinishedAt.IsZero() {
				t.Fatalf("job = %s %q finished %v; want failed %q", job.State, job.Reason, job.FinishedAt, tt.reason)
			}
		})
	}
}

func TestQueueShutdownRequeuesRunningJob(t *testing.T) {
	dir := t.TempDir()
	s := mustStore(t, dir)
	e := newFakeExec()
	q := mustQueue(t, s, e, 1)
	stop := mustRun(t, q)
	res := mustEnqueue(t, q, req(key(1), "d1", "one"))
	e.mustStarted(t)
	stop()
	if cause := e.cause(res.Job.ID); !errors.Is(cause, ErrShutdown) {
		t.Fatalf("executor saw cause %v; want ErrShutdown", cause)
	}
	job, err := q.Job(res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != StateQueued || job.Attempts != 1 || job.Reason != "" {
		t.Fatalf("after shutdown job = %s attempts %d %q; want queued, attempts 1", job.State, job.Attempts, job.Reason)
	}
	// A new request while stopped joins the interrupted job.
	if more := mustEnqueue(t, q, req(key(1), "d2", "two")); !more.Coalesced || more.Job.ID != res.Job.ID {
		t.Fatalf("request while stopped = %+v; want coalesced into %s", more, res.Job.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := mustStore(t, dir)
	e2 := newFakeExec()
	q2 := mustQueue(t, s2, e2, 1)
	mustRun(t, q2)
	again := e2.mustStarted(t)
	if again.ID != res.Job.ID || again.Attempts != 2 || !slices.Equal(instructions(again), []string{"one", "two"}) {
		t.Fatalf("after restart started %s attempt %d %q; want %s attempt 2 [one two]", again.ID, again.Attempts, instructions(again), res.Job.ID)
	}
	e2.finish(again.ID, nil)
	if job := mustWait(t, q2, again.ID); job.State != StateSucceeded {
		t.Fatalf("job: %s; want succeeded", job.State)
	}
}

func TestQueueEnqueueRejectsBadKeys(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, newFakeExec(), 1)
	tests := []struct {
		name string
		key  Key
		want string
	}{
		{"no owner", Key{Repo: "hello", Number: 1}, "owner and repository are required"},
		{"no repo", Key{Owner: "octo", Number: 1}, "owner and repository are required"},
		{"zero number", Key{Owner: "octo", Repo: "hello"}, "number must be positive"},
		{"negative number", Key{Owner: "octo", Repo: "hello", Number: -3}, "number must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := q.Enqueue(context.Background(), req(tt.key, "d", ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Enqueue(%v) error = %v; want one containing %q", tt.key, err, tt.want)
			}
		})
	}
}

func TestQueueRunTwiceFails(t *testing.T) {
	s := mustStore(t, t.TempDir())
	e := newFakeExec()
	q := mustQueue(t, s, e, 1)
	mustRun(t, q)
	mustEnqueue(t, q, req(key(1), "d1", "")) // once it starts, Run is surely active
	e.finish(e.mustStarted(t).ID, nil)
	if err := q.Run(context.Background()); err == nil {
		t.Fatal("second concurrent Run returned nil; want an error")
	}
}

// crashChildEnv names the store directory of the child process that
// TestQueueRestartAfterCrash kills.
const crashChildEnv = "GOHANDS_TEST_CRASH_CHILD_DIR"

// TestQueueCrashChild is the process that TestQueueRestartAfterCrash kills
// with SIGKILL while a job runs; on its own it does nothing.
func TestQueueCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("helper process for TestQueueRestartAfterCrash")
	}
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	q := mustQueue(t, s, ExecutorFunc(func(ctx context.Context, job *Job) error {
		started <- job.ID
		select {} // until killed
	}), 1)
	go q.Run(context.Background())
	id := <-started
	if _, err := q.Enqueue(context.Background(), req(key(1), "d3", "follow-up")); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("running %s\n", id)
	select {}
}

func TestQueueRestartAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	s := mustStore(t, dir)
	q := mustQueue(t, s, newFakeExec(), 1)
	a := mustEnqueue(t, q, req(key(1), "d1", "one"))
	b := mustEnqueue(t, q, req(key(2), "d2", "other"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestQueueCrashChild$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no chance to clean up
		t.Fatal(err)
	}
	cmd.Wait()
	if want := "running " + a.Job.ID + "\n"; line != want {
		t.Fatalf("child said %q; want %q", line, want)
	}

	s2 := mustStore(t, dir)
	if job, err := s2.Job(a.Job.ID); err != nil || job.State != StateRunning {
		t.Fatalf("after the crash job = %+v, %v; want still marked running", job, err)
	}
	e := newFakeExec()
	q2 := mustQueue(t, s2, e, 1)
	if res := mustEnqueue(t, q2, req(key(1), "d1", "redelivered")); !res.Duplicate {
		t.Fatal("delivery from before the crash not recognised as duplicate")
	}
	mustRun(t, q2)
	// The interrupted job runs again first, then the others, oldest first.
	var order []string
	for range 3 {
		job := e.mustStarted(t)
		order = append(order, fmt.Sprintf("%s attempt %d %q", job.Key, job.Attempts, instructions(job)))
		e.finish(job.ID, nil)
	}
	want := []string{
		`octo/hello#1 attempt 2 ["one"]`,
		`octo/hello#2 attempt 1 ["other"]`,
		`octo/hello#1 attempt 1 ["follow-up"]`,
	}
	if !slices.Equal(order, want) {
		t.Fatalf("after restart ran\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	if job := mustWait(t, q2, b.Job.ID); job.State != StateSucceeded {
		t.Fatalf("job %s: %s; want succeeded", b.Job.ID, job.State)
	}
}

func TestQueueShutdownGrace(t *testing.T) {
	if Stopping(context.Background()) != nil {
		t.Fatal("Stopping(background) is not nil")
	}
	tests := []struct {
		name  string
		grace time.Duration
		// finish is what the job returns once Stopping is closed.
		finish    func(ctx context.Context) error
		state     State
		cancelled bool // the job's context was cancelled before it returned
	}{
		{"safe point within grace", 5 * time.Second,
			func(context.Context) error { return fmt.Errorf("pushed work in progress: %w", ErrShutdown) }, StateQueued, false},
		{"finishes within grace", 5 * time.Second,
			func(context.Context) error { return nil }, StateSucceeded, false},
		{"ignores Stopping", 50 * time.Millisecond,
			func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) }, StateQueued, true},
		{"no grace", 0,
			func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) }, StateQueued, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustStore(t, t.TempDir())
			started := make(chan struct{})
			var sawCancel bool
			exec := ExecutorFunc(func(ctx context.Context, job *Job) error {
				close(started)
				<-Stopping(ctx)
				if tt.grace >= time.Second && ctx.Err() != nil {
					t.Errorf("context cancelled within the grace period: %v", context.Cause(ctx))
				}
				err := tt.finish(ctx)
				sawCancel = ctx.Err() != nil
				return err
			})
			q := NewQueue(s, exec, QueueOptions{Workers: 1, Logger: testLogger(t), ShutdownGrace: tt.grace})
			stop := mustRun(t, q)
			res := mustEnqueue(t, q, req(key(1), "d1", ""))
			select {
			case <-started:
			case <-time.After(testTimeout):
				t.Fatal("job did not start")
			}
			begin := time.Now()
			stop()
			if took := time.Since(begin); took > time.Second {
				t.Errorf("shutdown took %v; want well under the grace period", took)
			}
			job, err := q.Job(res.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if job.State != tt.state || sawCancel != tt.cancelled {
				t.Fatalf("job %s, context cancelled %v; want %s, %v", job.State, sawCancel, tt.state, tt.cancelled)
			}
		})
	}
}

func TestQueueWaitErrors(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, newFakeExec(), 1)
	if _, err := q.Wait(context.Background(), "no-such-job"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Wait(unknown) = %v; want ErrNotFound", err)
	}
	res := mustEnqueue(t, q, req(key(1), "d1", "")) // never runs: no Run
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	job, err := q.Wait(ctx, res.Job.ID)
	if !errors.Is(err, context.DeadlineExceeded) || job == nil || job.State != StateQueued {
		t.Errorf("Wait(queued, short ctx) = %v, %v; want the queued job and DeadlineExceeded", job, err)
	}
}

// markRunning marks a queued job running in the store only, as a process
// that died while running it would have left it.
func markRunning(tb testing.TB, s *Store, id string) {
	tb.Helper()
	err := s.update(context.Background(), func(tx *bolt.Tx) error {
		job, err := getJob(tx, id)
		if err != nil {
			return err
		}
		h, err := getHead(tx, keyID(job.Key))
		if err != nil {
			return err
		}
		if len(h.Queued) == 0 || h.Queued[0] != id {
			return fmt.Errorf("job %s is not first in line: %+v", id, h)
		}
		job.State, job.Attempts, job.StartedAt = StateRunning, job.Attempts+1, time.Now()
		h.Running, h.Queued = id, h.Queued[1:]
		if err := putJob(tx, job); err != nil {
			return err
		}
		return putHead(tx, keyID(job.Key), h)
	})
	if err != nil {
		tb.Fatalf("mark %s running: %v", id, err)
	}
}

func TestQueueCancelOrphanBeforeRun(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, newFakeExec(), 1)
	orphan := mustEnqueue(t, q, req(key(1), "d1", "one"))
	markRunning(t, s, orphan.Job.ID)
	follow := mustEnqueue(t, q, req(key(1), "d2", "two"))
	if follow.Coalesced || follow.Behind == nil || follow.Behind.ID != orphan.Job.ID {
		t.Fatalf("follow-up = %+v; want a new job behind %s", follow, orphan.Job.ID)
	}
	if ok, err := q.Cancel(context.Background(), key(1), "carol"); err != nil || !ok {
		t.Fatalf("Cancel = %v, %v; want true", ok, err)
	}
	for _, id := range []string{orphan.Job.ID, follow.Job.ID} {
		if job := mustWait(t, q, id); job.State != StateCancelled || job.Reason != "cancelled by carol" {
			t.Errorf("job %s = %s %q; want cancelled by carol", id, job.State, job.Reason)
		}
	}
	// Nothing is left to run or to put back.
	e := newFakeExec()
	q2 := mustQueue(t, s, e, 1)
	mustRun(t, q2)
	e.mustNotStart(t)
}

func TestQueueErrShutdownOutsideShutdownFails(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, ExecutorFunc(func(context.Context, *Job) error {
		return fmt.Errorf("confused: %w", ErrShutdown)
	}), 1)
	mustRun(t, q)
	res := mustEnqueue(t, q, req(key(1), "d1", ""))
	if job := mustWait(t, q, res.Job.ID); job.State != StateFailed || job.Attempts != 1 {
		t.Fatalf("job = %s after %d attempts; want failed after 1 (not queued again)", job.State, job.Attempts)
	}
}
