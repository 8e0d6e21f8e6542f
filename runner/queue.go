package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultWorkers is the number of jobs that run at once when
// QueueOptions.Workers (runner.workers) is zero.
const DefaultWorkers = 4

// pruneEvery is how often a running queue forgets old deliveries.
const pruneEvery = time.Hour

// ErrShutdown is the cause of a running job's context being cancelled when
// the process stops. A job whose context was cancelled so, or whose Execute
// returns an error wrapping ErrShutdown, is put back in the queue and runs
// again on the next start, resuming from its pushed branch.
var ErrShutdown = errors.New("gohands is shutting down")

type stoppingKey struct{}

// Stopping returns a channel that is closed when the process begins to shut
// down, QueueOptions.ShutdownGrace before the job's context is cancelled: an
// Executor can watch it to stop at its next safe point (push what it has,
// then return an error wrapping ErrShutdown). It is nil, so never ready,
// for a context that does not come from a Queue.
func Stopping(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stoppingKey{}).(chan struct{})
	return ch
}

// CancelledError is the cause of a running job's context being cancelled
// by Queue.Cancel.
type CancelledError struct {
	// By names who cancelled the job.
	By string
}

// Error says who cancelled the job.
func (e *CancelledError) Error() string {
	if e.By == "" {
		return "cancelled"
	}
	return "cancelled by " + e.By
}

// Executor does the work of one job: the pipeline from clone to pull request.
type Executor interface {
	// Execute runs job. Returning nil marks it succeeded; an error marks it
	// failed with the error's text as the reason, unless ctx was cancelled by
	// Queue.Cancel (the job is cancelled) or the process is stopping and ctx
	// was cancelled with ErrShutdown or the error wraps it (the job is queued
	// again). Execute may set job.PullRequest; the queue stores it with the
	// outcome.
	Execute(ctx context.Context, job *Job) error
}

// ExecutorFunc adapts a function to the Executor interface.
type ExecutorFunc func(ctx context.Context, job *Job) error

// Execute calls f(ctx, job).
func (f ExecutorFunc) Execute(ctx context.Context, job *Job) error { return f(ctx, job) }

// QueueOptions configure a Queue; the zero value is usable.
type QueueOptions struct {
	// Workers bounds how many jobs run at once (runner.workers);
	// DefaultWorkers when zero.
	Workers int
	// Logger receives the queue's logs; slog.Default() when nil.
	Logger *slog.Logger
	// ShutdownGrace is how long running jobs get, once shutdown begins
	// (Stopping), to reach a safe point before their contexts are cancelled
	// with ErrShutdown; zero cancels them at once.
	ShutdownGrace time.Duration
	// Notify, when set, is called after every change of a job's state (and
	// when a new job is queued), from the goroutine that made the change. It
	// must not block.
	Notify func(ev Event)
}

// Event reports a job's state change to QueueOptions.Notify.
type Event struct {
	// Job is a copy of the job after the change; the receiver may keep it.
	Job *Job
}

// Enqueued says what Queue.Enqueue did with a request.
type Enqueued struct {
	// Job is the job that carries the request, as read just after the
	// request was recorded (for a duplicate: the job the first delivery went
	// to, if it still exists).
	Job *Job
	// Duplicate is set when the delivery was seen before; nothing changed.
	Duplicate bool
	// Coalesced is set when the request was added to a job already queued
	// for the key, rather than starting a new job.
	Coalesced bool
	// Behind is the job that was running for the key, which this one waits
	// for; nil when the key was not busy. The requester should be told.
	Behind *Job
}

// Queue is the durable job queue: one job at a time per key, at most
// Workers jobs at once, requests for a busy key coalesced into one
// follow-up job. Its state lives in a Store, so a restart loses nothing.
type Queue struct {
	store   *Store
	exec    Executor
	workers int
	log     *slog.Logger
	notify  func(Event)
	grace   time.Duration

	wake chan struct{} // a job was queued or finished: look for work

	mu      sync.Mutex
	running map[string]*run // by keyID
	active  bool            // Run is running

	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced when a job finishes
}

// run is a job in progress in this process.
type run struct {
	id       string
	cancel   context.CancelCauseFunc
	stopping chan struct{} // closed when shutdown begins
}

// NewQueue returns a queue over store that runs jobs with exec once Run
// is called. Enqueue works before Run: the jobs wait in the store.
func NewQueue(store *Store, exec Executor, opts QueueOptions) *Queue {
	q := &Queue{
		store:   store,
		exec:    exec,
		workers: cmp.Or(opts.Workers, DefaultWorkers),
		log:     cmp.Or(opts.Logger, slog.Default()),
		notify:  opts.Notify,
		grace:   opts.ShutdownGrace,
		wake:    make(chan struct{}, 1),
		running: make(map[string]*run),
		changed: make(chan struct{}),
	}
	if q.workers < 1 {
		q.workers = 1
	}
	return q
}

// Enqueue records r durably and returns at once, without waiting for the
// job. A request whose DeliveryID was seen before changes nothing
// (Duplicate). Otherwise it is added to the last job queued for the key if
// there is one (Coalesced), else it becomes a new queued job; Behind names
// the job running for the key, if any.
func (q *Queue) Enqueue(ctx context.Context, r Request) (Enqueued, error) {
	if err := validateKey(r.Key); err != nil {
		return Enqueued{}, fmt.Errorf("enqueue: %w", err)
	}
	now := time.Now().UTC()
	if r.ReceivedAt.IsZero() {
		r.ReceivedAt = now
	}
	kid := keyID(r.Key)
	// The write transaction only records the request; reading the jobs back
	// for the answer happens after it, so as not to hold up other writers.
	var (
		res             Enqueued
		jobID, behindID string
	)
	err := q.store.update(ctx, func(tx *bolt.Tx) error {
		res, jobID, behindID = Enqueued{}, "", ""
		rec, err := getKeyRecord(tx, kid)
		if err != nil {
			return err
		}
		if r.DeliveryID != "" {
			if id, seen := rec.delivery(r.DeliveryID); seen {
				res.Duplicate, jobID = true, id
				return nil
			}
		}
		h, err := getHead(tx, kid)
		if err != nil {
			return err
		}
		behindID = h.Running
		if n := len(h.Queued); n > 0 {
			jobID = h.Queued[n-1]
			if err := addRequest(tx, jobID, r); err != nil {
				return err
			}
			res.Coalesced = true
		} else {
			job := &Job{
				ID:        q.store.newJobID(now),
				Key:       r.Key,
				Requests:  []Request{r},
				State:     StateQueued,
				CreatedAt: now,
			}
			if err := newJobTx(tx, job); err != nil {
				return err
			}
			h.Queued = append(h.Queued, job.ID)
			if err := putHead(tx, kid, h); err != nil {
				return err
			}
			res.Job, jobID = job, job.ID
			rec.Jobs = append(rec.Jobs, job.ID)
		}
		if r.DeliveryID != "" {
			rec.addDelivery(r.DeliveryID, jobID, now)
		} else if res.Coalesced {
			return nil // the record is unchanged
		}
		return putKeyRecord(tx, kid, rec)
	})
	if err != nil {
		return Enqueued{}, fmt.Errorf("enqueue %s (delivery %q): %w", r.Key, r.DeliveryID, err)
	}
	if res.Job == nil && jobID != "" {
		if res.Job, err = q.store.Job(jobID); err != nil && !res.Duplicate {
			return res, fmt.Errorf("enqueue %s: request recorded, but: %w", r.Key, err)
		}
	}
	if behindID != "" {
		if res.Behind, err = q.store.Job(behindID); err != nil {
			return res, fmt.Errorf("enqueue %s: request recorded, but: %w", r.Key, err)
		}
	}
	if res.Duplicate {
		q.log.InfoContext(ctx, "duplicate delivery ignored", "key", r.Key.String(), "delivery", r.DeliveryID)
		return res, nil
	}
	q.log.InfoContext(ctx, "request queued", "key", r.Key.String(), "delivery", r.DeliveryID,
		"job", res.Job.ID, "coalesced", res.Coalesced, "busy", res.Behind != nil)
	if !res.Coalesced {
		q.emit(res.Job)
	}
	q.poke()
	return res, nil
}

func validateKey(k Key) error {
	switch {
	case k.Owner == "" || k.Repo == "":
		return fmt.Errorf("key %q: owner and repository are required", k.String())
	case k.Number <= 0:
		return fmt.Errorf("key %q: issue or pull request number must be positive", k.String())
	}
	return nil
}

// Cancel stops the job running for key (its context is cancelled with a
// *CancelledError naming by) and cancels the jobs queued for it. It reports
// whether there was anything to cancel.
func (q *Queue) Cancel(ctx context.Context, key Key, by string) (cancelled bool, err error) {
	kid := keyID(key)
	reason := (&CancelledError{By: by}).Error()
	now := time.Now().UTC()
	var dropped []*Job
	// Holding q.mu keeps the dispatcher from starting a job for key between
	// the transaction and the look-up in q.running, and makes a job marked
	// running in the store but absent from q.running an orphan of a dead
	// process (Run has not put it back yet), which is cancelled here too.
	q.mu.Lock()
	r := q.running[kid]
	err = q.store.update(ctx, func(tx *bolt.Tx) error {
		dropped = nil
		h, err := getHead(tx, kid)
		if err != nil {
			return err
		}
		ids := h.Queued
		if h.Running != "" && r == nil {
			ids = append([]string{h.Running}, ids...)
			h.Running = ""
		}
		for _, id := range ids {
			job, err := getJob(tx, id)
			if err != nil {
				return err
			}
			job.State, job.Reason, job.FinishedAt = StateCancelled, reason, now
			if err := putJob(tx, job); err != nil {
				return err
			}
			dropped = append(dropped, job)
		}
		h.Queued = nil
		return putHead(tx, kid, h)
	})
	if err == nil && r != nil {
		r.cancel(&CancelledError{By: by})
	}
	q.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("cancel %s: %w", key, err)
	}
	for _, job := range dropped {
		q.log.InfoContext(ctx, "queued job cancelled", "key", key.String(), "job", job.ID, "by", by)
		q.emit(job)
	}
	if len(dropped) > 0 {
		q.broadcast()
	}
	if r != nil {
		q.log.InfoContext(ctx, "cancelling running job", "key", key.String(), "job", r.id, "by", by)
	}
	return r != nil || len(dropped) > 0, nil
}

// Job returns the job with the given ID, or an error wrapping ErrNotFound.
func (q *Queue) Job(id string) (*Job, error) { return q.store.Job(id) }

// Jobs returns every job for key, oldest first.
func (q *Queue) Jobs(key Key) ([]*Job, error) { return q.store.Jobs(key) }

// Wait blocks until the job is done (succeeded, failed or cancelled) and
// returns it, or returns ctx's error.
func (q *Queue) Wait(ctx context.Context, id string) (*Job, error) {
	for {
		q.changedMu.Lock()
		changed := q.changed
		q.changedMu.Unlock()
		job, err := q.store.Job(id)
		if err != nil {
			return nil, err
		}
		if job.State.Done() {
			return job, nil
		}
		select {
		case <-ctx.Done():
			return job, fmt.Errorf("wait for job %s: %w", id, context.Cause(ctx))
		case <-changed:
		}
	}
}

// Run runs queued jobs until ctx is done. It first puts back in the queue
// the jobs a previous process left running (they run again, resuming from
// their branch), then starts queued jobs oldest first, never two for one
// key and never more than Workers. When ctx is done it starts no more jobs,
// closes Stopping, waits up to ShutdownGrace, cancels the jobs still
// running with ErrShutdown, waits for them to return (they go back in the
// queue) and returns nil. Only one Run may be active per Queue.
func (q *Queue) Run(ctx context.Context) error {
	q.mu.Lock()
	if q.active {
		q.mu.Unlock()
		return errors.New("queue: Run is already running")
	}
	q.active = true
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.active = false
		q.mu.Unlock()
	}()

	if err := q.requeueOrphans(ctx); err != nil {
		return err
	}
	// Jobs must outlive ctx long enough to be told why they stop, so they get
	// a context of their own that keeps ctx's values.
	base := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	q.poke()
	for {
		select {
		case <-ctx.Done():
			q.shutdown(base, &wg)
			return nil
		case <-prune.C:
			if _, err := q.store.PruneDeliveries(ctx, time.Now().Add(-DeliveryRetention)); err != nil {
				q.log.ErrorContext(ctx, "prune deliveries", "err", err)
			}
		case <-q.wake:
			if err := q.dispatch(base, &wg); err != nil {
				q.log.ErrorContext(ctx, "start jobs", "err", err)
			}
		}
	}
}

// shutdown tells the running jobs to stop, gives them the grace period,
// then cancels those still running and waits for all of them.
func (q *Queue) shutdown(ctx context.Context, wg *sync.WaitGroup) {
	q.mu.Lock()
	for _, r := range q.running {
		close(r.stopping)
	}
	n := len(q.running)
	q.mu.Unlock()
	q.log.InfoContext(ctx, "queue stopping", "running", n, "grace", q.grace)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	if q.grace > 0 {
		t := time.NewTimer(q.grace)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
	q.mu.Lock()
	for _, r := range q.running {
		r.cancel(ErrShutdown)
	}
	q.mu.Unlock()
	<-done
}

// requeueOrphans puts back in the queue, ahead of their follow-ups, the
// jobs a dead process left running.
func (q *Queue) requeueOrphans(ctx context.Context) error {
	var orphans []*Job
	err := q.store.update(ctx, func(tx *bolt.Tx) error {
		orphans = nil
		type kh struct {
			kid string
			h   head
		}
		var heads []kh
		err := tx.Bucket(bucketHeads).ForEach(func(k, v []byte) error {
			h, err := getHead(tx, string(k))
			if err == nil && h.Running != "" {
				heads = append(heads, kh{string(k), h})
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, e := range heads {
			job, err := getJob(tx, e.h.Running)
			if err != nil {
				return err
			}
			job.State = StateQueued
			if err := putJob(tx, job); err != nil {
				return err
			}
			e.h.Queued = append([]string{job.ID}, e.h.Queued...)
			e.h.Running = ""
			if err := putHead(tx, e.kid, e.h); err != nil {
				return err
			}
			orphans = append(orphans, job)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: requeue jobs left running: %w", err)
	}
	for _, job := range orphans {
		q.log.WarnContext(ctx, "job was running when gohands stopped; queued again",
			"key", job.Key.String(), "job", job.ID, "attempts", job.Attempts)
		q.emit(job)
	}
	return nil
}

// dispatch starts as many queued jobs as free workers allow.
func (q *Queue) dispatch(base context.Context, wg *sync.WaitGroup) error {
	started, err := q.start(base, wg)
	for _, job := range started {
		q.emit(job)
	}
	return err
}

// start marks up to the free number of workers' worth of queued jobs
// running and starts them, returning copies of them as they were started.
func (q *Queue) start(base context.Context, wg *sync.WaitGroup) ([]*Job, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	free := q.workers - len(q.running)
	if free <= 0 {
		return nil, nil
	}
	// Look first with a read transaction, so that idle wake-ups cost no fsync.
	var found bool
	err := q.store.db.View(func(tx *bolt.Tx) error {
		cands, err := q.candidates(tx, 1)
		found = len(cands) > 0
		return err
	})
	if err != nil || !found {
		return nil, err
	}
	now := time.Now().UTC()
	var started []*Job
	err = q.store.update(base, func(tx *bolt.Tx) error {
		started = nil
		cands, err := q.candidates(tx, free)
		if err != nil {
			return err
		}
		for _, c := range cands {
			job, err := getJob(tx, c.h.Queued[0])
			if err != nil {
				return err
			}
			job.State, job.StartedAt, job.Reason = StateRunning, now, ""
			job.FinishedAt = time.Time{}
			job.Attempts++
			if err := putJob(tx, job); err != nil {
				return err
			}
			c.h.Running, c.h.Queued = job.ID, c.h.Queued[1:]
			if err := putHead(tx, c.kid, c.h); err != nil {
				return err
			}
			started = append(started, job)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	copies := make([]*Job, 0, len(started))
	for _, job := range started {
		kid := keyID(job.Key)
		stopping := make(chan struct{})
		jctx, cancel := context.WithCancelCause(context.WithValue(base, stoppingKey{}, stopping))
		q.running[kid] = &run{id: job.ID, cancel: cancel, stopping: stopping}
		q.log.InfoContext(base, "job started", "key", job.Key.String(), "job", job.ID,
			"attempt", job.Attempts, "requests", len(job.Requests))
		c := *job
		c.Requests = slices.Clone(job.Requests)
		copies = append(copies, &c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel(nil)
			q.work(jctx, kid, job)
		}()
	}
	return copies, nil
}

type candidate struct {
	kid string
	h   head
}

// candidates returns up to n keys whose first queued job can start now,
// oldest job first. The caller holds q.mu.
func (q *Queue) candidates(tx *bolt.Tx, n int) ([]candidate, error) {
	var cands []candidate
	err := tx.Bucket(bucketHeads).ForEach(func(k, _ []byte) error {
		kid := string(k)
		if q.running[kid] != nil {
			return nil
		}
		h, err := getHead(tx, kid)
		if err != nil {
			return err
		}
		if h.Running == "" && len(h.Queued) > 0 {
			cands = append(cands, candidate{kid, h})
		}
		return nil
	})
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.h.Queued[0], b.h.Queued[0]) })
	return cands[:min(n, len(cands))], err
}

// work runs one job and records how it ended.
func (q *Queue) work(ctx context.Context, kid string, job *Job) {
	requests := slices.Clone(job.Requests)
	err := q.execute(ctx, job)
	cause := context.Cause(ctx)
	// Only shutdown puts a job back: an executor that returned ErrShutdown
	// at another time would otherwise run again and again.
	var stopping bool
	select {
	case <-Stopping(ctx):
		stopping = true
	default:
	}
	now := time.Now().UTC()
	log := q.log.With("key", job.Key.String(), "job", job.ID)

	var final *Job
	uerr := q.store.update(context.WithoutCancel(ctx), func(tx *bolt.Tx) error {
		stored, err2 := getJobMeta(tx, job.ID)
		if err2 != nil {
			return err2
		}
		h, err2 := getHead(tx, kid)
		if err2 != nil {
			return err2
		}
		h.Running = ""
		stored.PullRequest = job.PullRequest
		var cancelled *CancelledError
		switch {
		case err == nil:
			stored.State, stored.Reason, stored.FinishedAt = StateSucceeded, "", now
		case stopping && (errors.Is(err, ErrShutdown) || errors.Is(cause, ErrShutdown)):
			stored.State, stored.Reason = StateQueued, ""
			h.Queued = append([]string{job.ID}, h.Queued...)
		case ctx.Err() != nil && errors.As(cause, &cancelled):
			stored.State, stored.Reason, stored.FinishedAt = StateCancelled, cancelled.Error(), now
		default:
			stored.State, stored.Reason, stored.FinishedAt = StateFailed, err.Error(), now
		}
		if err2 := putJob(tx, stored); err2 != nil {
			return err2
		}
		final = stored
		final.Requests = requests // only queued jobs gain requests
		return putHead(tx, kid, h)
	})

	q.mu.Lock()
	delete(q.running, kid)
	q.mu.Unlock()
	if uerr != nil {
		// The store still says running: the next start runs the job again.
		log.ErrorContext(ctx, "record job outcome", "err", uerr, "job_err", err)
		q.poke()
		return
	}
	switch final.State {
	case StateQueued:
		log.InfoContext(ctx, "job interrupted by shutdown; queued again")
	case StateFailed:
		log.WarnContext(ctx, "job failed", "reason", final.Reason)
	default:
		log.InfoContext(ctx, "job "+string(final.State), "reason", final.Reason,
			"duration", now.Sub(final.StartedAt).Round(time.Millisecond))
	}
	q.emit(final)
	q.broadcast()
	q.poke()
}

// execute calls the executor, turning a panic into an error so that one
// bad job does not take the server down.
func (q *Queue) execute(ctx context.Context, job *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			q.log.ErrorContext(ctx, "job panicked", "job", job.ID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	return q.exec.Execute(ctx, job)
}

// poke wakes the dispatcher without blocking.
func (q *Queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// broadcast wakes every Wait.
func (q *Queue) broadcast() {
	q.changedMu.Lock()
	close(q.changed)
	q.changed = make(chan struct{})
	q.changedMu.Unlock()
}

func (q *Queue) emit(job *Job) {
	if q.notify == nil {
		return
	}
	c := *job
	c.Requests = slices.Clone(job.Requests)
	q.notify(Event{Job: &c})
}
