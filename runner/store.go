package runner

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// StoreFile is the name of the database file inside the store directory.
const StoreFile = "gohands.db"

// DeliveryRetention is how long a webhook delivery ID is remembered for
// de-duplication. GitHub redelivers within days, not weeks.
const DeliveryRetention = 7 * 24 * time.Hour

// ErrNotFound is returned when a job does not exist in the store.
var ErrNotFound = errors.New("not found")

// errStoreClosed is returned by writes after Close.
var errStoreClosed = errors.New("store is closed")

// maxBatch bounds how many concurrent writes share one transaction.
const maxBatch = 256

// Bucket names. The layout, one bucket each:
//
//	jobs       job ID → JSON Job without its requests (IDs sort by creation time)
//	requests   job ID + 4-byte big-endian index → JSON Request, so that
//	           coalescing a request appends a row instead of rewriting the job
//	heads      lower(owner/repo#n) → JSON head: the running job and the queued
//	           jobs, in order; only keys with either have one
//	keys       lower(owner/repo#n) → JSON keyRecord: every job of the key and
//	           the deliveries that reached it lately
//	events     job ID → sub-bucket of 8-byte sequence → JSON event
//	once       name → RFC 3339 time of the first call
//	meta       "layout" → the layout's version, storeLayout
//
// Enqueuing a new job writes to jobs and requests, where it appends, and to
// heads and keys. Each bucket a write touches costs a B-tree path of pages
// read into memory and written back at the commit, so the per-key indexes
// share one record instead of having a bucket each.
var (
	bucketJobs     = []byte("jobs")
	bucketRequests = []byte("requests")
	bucketHeads    = []byte("heads")
	bucketKeys     = []byte("keys")
	bucketEvents   = []byte("events")
	bucketOnce     = []byte("once")
	bucketMeta     = []byte("meta")
	allBuckets     = [][]byte{bucketJobs, bucketRequests, bucketHeads, bucketKeys, bucketEvents, bucketOnce, bucketMeta}
)

// storeLayout is the version of the layout above. Version 1, which had no
// meta bucket, had a keyjobs and a deliveries bucket instead of keys; it is
// migrated on open. A store of a later version is refused rather than
// misread.
const storeLayout = 2

var metaLayout = []byte("layout")

// Store is the durable state of gohands: jobs, their event logs, the webhook
// deliveries already seen and "do once" markers, in one bbolt file.
//
// bbolt is used because it is pure Go (the binary stays static), keeps
// everything in one file, and its transactions are ACID and fsync'd on
// commit. Concurrent writes are grouped into one transaction (group commit),
// so many webhooks arriving at once share one fsync.
type Store struct {
	db *bolt.DB

	wmu     sync.Mutex
	idle    *sync.Cond // signalled when leading becomes false
	closed  bool
	leading bool       // a writer is committing
	pending []*writeOp // writes waiting for the next commit, oldest first

	idMu   sync.Mutex
	lastID time.Time
}

// OpenStore opens (creating it and dir if needed) the store in dir and
// forgets deliveries older than DeliveryRetention. A store is used by one
// process at a time: a second open waits a few seconds, then fails.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open store: store.path is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := filepath.Join(dir, StoreFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: 3 * time.Second, // another process holds the file lock
		// As etcd does: the free-page list is rebuilt on open instead of
		// being written on every commit, and kept in a hash map.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		// Address space, not memory: growing the file up to this size needs no
		// re-mapping, which would wait for every open read transaction.
		InitialMmapSize: 256 << 20,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: it is in use by another gohands process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db}
	s.idle = sync.NewCond(&s.wmu)
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaLayout); v != nil {
			n, err := strconv.Atoi(string(v))
			if err != nil || n > storeLayout {
				return fmt.Errorf("the store has layout %q, written by a newer gohands; this one reads layouts up to %d", v, storeLayout)
			}
		}
		if k, _ := tx.Bucket(bucketJobs).Cursor().Last(); k != nil {
			s.lastID = idTime(string(k))
		}
		if err := migrateKeyIndexes(tx); err != nil {
			return err
		}
		return meta.Put(metaLayout, []byte(strconv.Itoa(storeLayout)))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if _, err := s.PruneDeliveries(context.Background(), time.Now().Add(-DeliveryRetention)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close waits for pending writes and closes the database file. It is safe
// to call twice.
func (s *Store) Close() error {
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return nil
	}
	s.closed = true
	for s.leading {
		s.idle.Wait()
	}
	s.wmu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Path is the database file.
func (s *Store) Path() string { return s.db.Path() }

// writeOp is one write waiting for the group commit.
type writeOp struct {
	fn   func(*bolt.Tx) error
	done chan error // the outcome, or errLead
}

// errLead tells a waiting writer that it is now the leader: it commits the
// writes waiting at that moment, its own first.
var errLead = errors.New("lead the next commit")

// update runs fn in a write transaction shared with other concurrent
// writes, and returns once that transaction is on disk. fn may be called
// more than once (when another write in the same batch fails, each is
// retried alone), so it must only touch the transaction and variables that
// it sets afresh on each call.
//
// This is group commit with a leader, as in LevelDB: a write that finds no
// commit in progress commits at once in its own goroutine; writes arriving
// during a commit wait, and the oldest of them then commits all of them in
// one transaction. No write waits for a timer, and an uncontended write
// costs no goroutine switch.
func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	op := &writeOp{fn: fn, done: make(chan error, 1)}
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return errStoreClosed
	}
	s.pending = append(s.pending, op)
	lead := !s.leading
	s.leading = true
	s.wmu.Unlock()
	if !lead {
		if err := <-op.done; err != errLead {
			return err
		}
	}
	s.wmu.Lock()
	n := min(len(s.pending), maxBatch)
	batch := slices.Clone(s.pending[:n])
	s.pending = slices.Delete(s.pending, 0, n)
	s.wmu.Unlock()

	s.commit(batch)

	s.wmu.Lock()
	if len(s.pending) > 0 {
		s.pending[0].done <- errLead
	} else {
		s.leading = false
		s.idle.Broadcast()
	}
	s.wmu.Unlock()
	return <-op.done
}

// errInBatch marks a batch aborted because one of its functions failed.
var errInBatch = errors.New("a write in the batch failed")

func (s *Store) commit(batch []*writeOp) {
	err := s.safeUpdate(func(tx *bolt.Tx) error {
		for _, op := range batch {
			if err := op.fn(tx); err != nil {
				return errInBatch
			}
		}
		return nil
	})
	if !errors.Is(err, errInBatch) {
		for _, op := range batch {
			op.done <- err
		}
		return
	}
	// One function failed and took the others down with it: run each alone,
	// in order, so each gets its own result.
	for _, op := range batch {
		op.done <- s.safeUpdate(op.fn)
	}
}

// safeUpdate is db.Update, with a panic in fn turned into an error so that
// the writers waiting on this commit are not stranded.
func (s *Store) safeUpdate(fn func(*bolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	return s.db.Update(fn)
}

// newJobID returns a unique ID that sorts by creation time, such as
// 20261121T142300.123456-9f86d081. IDs never go backwards within a store,
// even when the clock does.
func (s *Store) newJobID(now time.Time) string {
	s.idMu.Lock()
	t := now.UTC().Truncate(time.Microsecond)
	if !t.After(s.lastID) {
		t = s.lastID.Add(time.Microsecond)
	}
	s.lastID = t
	s.idMu.Unlock()
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return t.Format(idTimeLayout) + "-" + hex.EncodeToString(b[:])
}

const idTimeLayout = "20060102T150405.000000"

// idTime is the creation time encoded in a job ID; zero when it has none.
func idTime(id string) time.Time {
	ts, _, _ := strings.Cut(id, "-")
	t, err := time.Parse(idTimeLayout, ts)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Job returns the job with the given ID, or an error wrapping ErrNotFound.
func (s *Store) Job(id string) (*Job, error) {
	var job *Job
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		job, err = getJob(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// Jobs returns every job for key, oldest first.
func (s *Store) Jobs(key Key) ([]*Job, error) {
	var jobs []*Job
	err := s.db.View(func(tx *bolt.Tx) error {
		jobs = nil
		rec, err := getKeyRecord(tx, keyID(key))
		if err != nil {
			return err
		}
		for _, id := range rec.Jobs {
			job, err := getJob(tx, id)
			if err != nil {
				return err
			}
			jobs = append(jobs, job)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("jobs for %s: %w", key, err)
	}
	return jobs, nil
}

// AppendEvent adds event, encoded as JSON, to the end of the job's event
// log. The log is append-only and keeps the order of the calls.
func (s *Store) AppendEvent(ctx context.Context, jobID string, event any) error {
	data, err := json.Marshal(event)
	if err != nil {
		return fmt.Errorf("append event to job %s: encode: %w", jobID, err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketJobs).Get([]byte(jobID)) == nil {
			return fmt.Errorf("job %s: %w", jobID, ErrNotFound)
		}
		b, err := tx.Bucket(bucketEvents).CreateBucketIfNotExists([]byte(jobID))
		if err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, seq), data)
	})
	if err != nil {
		return fmt.Errorf("append event to job %s: %w", jobID, err)
	}
	return nil
}

// Events returns the job's event log in the order it was written; empty
// when the job has none.
func (s *Store) Events(jobID string) ([]json.RawMessage, error) {
	var events []json.RawMessage
	err := s.db.View(func(tx *bolt.Tx) error {
		events = nil
		b := tx.Bucket(bucketEvents).Bucket([]byte(jobID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			events = append(events, json.RawMessage(append([]byte(nil), v...)))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("events of job %s: %w", jobID, err)
	}
	return events, nil
}

// Once reports whether this is the first call with name, ever, for this
// store: it is a persisted "do this only once" marker, such as one polite
// reply per issue to someone without write access.
func (s *Store) Once(ctx context.Context, name string) (first bool, err error) {
	if name == "" {
		return false, errors.New("once: name is empty")
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOnce)
		first = b.Get([]byte(name)) == nil
		if !first {
			return nil
		}
		return b.Put([]byte(name), []byte(now))
	})
	if err != nil {
		return false, fmt.Errorf("once %q: %w", name, err)
	}
	return first, nil
}

// PruneDeliveries forgets the deliveries received before t, returning how
// many it removed. OpenStore and Queue.Run call it; redeliveries of older
// webhooks are then treated as new.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := s.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		type pruned struct {
			kid string
			rec keyRecord
		}
		var changed []pruned
		err := tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
			// Most keys have no delivery left to forget (the field is
			// omitted when empty): skip them without decoding.
			if !bytes.Contains(v, []byte(`"deliveries"`)) {
				return nil
			}
			var rec keyRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				// Left as it is: an enqueue for that key reports it.
				return nil
			}
			if m := rec.pruneDeliveries(before); m > 0 {
				n += m
				changed = append(changed, pruned{string(k), rec})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, c := range changed {
			if err := putKeyRecord(tx, c.kid, c.rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return n, nil
}

// keyID is the store's name for a key. GitHub owner and repository names
// are case-insensitive, so it is lower-cased: Octo/Hello#1 and octo/hello#1
// are one key.
func keyID(k Key) string { return strings.ToLower(k.String()) }

// head is the live state of one key: the job running for it (at most one)
// and the jobs waiting, in the order they will run. Keys with neither have
// no head.
type head struct {
	Running string   `json:"running,omitempty"`
	Queued  []string `json:"queued,omitempty"`
}

func getHead(tx *bolt.Tx, kid string) (head, error) {
	var h head
	v := tx.Bucket(bucketHeads).Get([]byte(kid))
	if v == nil {
		return h, nil
	}
	if err := json.Unmarshal(v, &h); err != nil {
		return h, fmt.Errorf("decode state of %s: %w", kid, err)
	}
	return h, nil
}

func putHead(tx *bolt.Tx, kid string, h head) error {
	b := tx.Bucket(bucketHeads)
	if h.Running == "" && len(h.Queued) == 0 {
		return b.Delete([]byte(kid))
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return b.Put([]byte(kid), data)
}

// getJob reads a job with its requests.
func getJob(tx *bolt.Tx, id string) (*Job, error) {
	job, err := getJobMeta(tx, id)
	if err != nil {
		return nil, err
	}
	prefix := []byte(id)
	c := tx.Bucket(bucketRequests).Cursor()
	for k, v := c.Seek(prefix); k != nil && len(k) == len(prefix)+4 && string(k[:len(prefix)]) == id; k, v = c.Next() {
		var r Request
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("decode request %d of job %s: %w", binary.BigEndian.Uint32(k[len(prefix):]), id, err)
		}
		job.Requests = append(job.Requests, r)
	}
	return job, nil
}

// getJobMeta reads a job without its requests, for state changes.
func getJobMeta(tx *bolt.Tx, id string) (*Job, error) {
	v := tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	job := new(Job)
	if err := json.Unmarshal(v, job); err != nil {
		return nil, fmt.Errorf("decode job %s: %w", id, err)
	}
	return job, nil
}

// putJob writes a job's fields other than its requests, which are written
// once each by addRequest.
func putJob(tx *bolt.Tx, job *Job) error {
	meta := *job
	meta.Requests = nil
	data, err := json.Marshal(&meta)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", job.ID, err)
	}
	return tx.Bucket(bucketJobs).Put([]byte(job.ID), data)
}

// newJobTx stores a new job with its requests; the caller adds it to its
// key's record.
func newJobTx(tx *bolt.Tx, job *Job) error {
	if err := putJob(tx, job); err != nil {
		return err
	}
	for _, r := range job.Requests {
		if err := addRequest(tx, job.ID, r); err != nil {
			return err
		}
	}
	return nil
}

// keyRecord is what the store keeps of a key beyond its live state: every
// job it has had, and the webhook deliveries that reached it in the last
// DeliveryRetention, for de-duplication. A redelivery carries the same
// payload, so it names the same key: looking a delivery up under its key
// is enough.
type keyRecord struct {
	Jobs       []string         `json:"jobs,omitempty"`
	Deliveries []deliveryRecord `json:"deliveries,omitempty"`
}

// deliveryRecord is one X-GitHub-Delivery and the job it went to.
type deliveryRecord struct {
	ID  string `json:"id"`
	At  int64  `json:"at"` // unix nanoseconds
	Job string `json:"job"`
}

// delivery looks up a delivery ID, returning the job it went to.
func (r *keyRecord) delivery(id string) (jobID string, seen bool) {
	for _, d := range r.Deliveries {
		if d.ID == id {
			return d.Job, true
		}
	}
	return "", false
}

// addDelivery records a delivery, forgetting those older than the
// retention as it goes.
func (r *keyRecord) addDelivery(id, jobID string, at time.Time) {
	r.pruneDeliveries(at.Add(-DeliveryRetention))
	r.Deliveries = append(r.Deliveries, deliveryRecord{ID: id, At: at.UnixNano(), Job: jobID})
}

// pruneDeliveries forgets the deliveries received before t and says how
// many it forgot.
func (r *keyRecord) pruneDeliveries(before time.Time) int {
	n := len(r.Deliveries)
	r.Deliveries = slices.DeleteFunc(r.Deliveries, func(d deliveryRecord) bool { return d.At < before.UnixNano() })
	return n - len(r.Deliveries)
}

func getKeyRecord(tx *bolt.Tx, kid string) (keyRecord, error) {
	var r keyRecord
	v := tx.Bucket(bucketKeys).Get([]byte(kid))
	if v == nil {
		return r, nil
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("decode record of %s: %w", kid, err)
	}
	return r, nil
}

func putKeyRecord(tx *bolt.Tx, kid string, r keyRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode record of %s: %w", kid, err)
	}
	return tx.Bucket(bucketKeys).Put([]byte(kid), data)
}

// Buckets of the first layout, which had a bucket per index.
var (
	oldBucketKeyJobs    = []byte("keyjobs")    // lower(key) NUL job ID → empty
	oldBucketDeliveries = []byte("deliveries") // delivery ID → 8-byte big-endian unix nanos + job ID
)

// migrateKeyIndexes moves the first layout's keyjobs and deliveries buckets
// into the keys bucket, in the transaction that opens the store, so that
// an upgrade loses neither a job's history nor de-duplication.
func migrateKeyIndexes(tx *bolt.Tx) error {
	recs := map[string]*keyRecord{}
	rec := func(kid string) (*keyRecord, error) {
		if r, ok := recs[kid]; ok {
			return r, nil
		}
		r, err := getKeyRecord(tx, kid)
		recs[kid] = &r
		return &r, err
	}
	if b := tx.Bucket(oldBucketKeyJobs); b != nil {
		err := b.ForEach(func(k, _ []byte) error {
			kid, id, ok := strings.Cut(string(k), "\x00")
			if !ok {
				return fmt.Errorf("migrate keyjobs: malformed row %q", k)
			}
			r, err := rec(kid)
			if err == nil && !slices.Contains(r.Jobs, id) {
				r.Jobs = append(r.Jobs, id)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if b := tx.Bucket(oldBucketDeliveries); b != nil {
		err := b.ForEach(func(k, v []byte) error {
			if len(v) <= 8 {
				return nil // no job: nothing to de-duplicate against
			}
			jobID := string(v[8:])
			job, err := getJobMeta(tx, jobID)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("migrate delivery %s: %w", k, err)
			}
			r, err := rec(keyID(job.Key))
			if err == nil {
				r.Deliveries = append(r.Deliveries, deliveryRecord{ID: string(k), At: int64(binary.BigEndian.Uint64(v)), Job: jobID})
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	for kid, r := range recs {
		slices.Sort(r.Jobs) // IDs sort by creation time
		slices.SortFunc(r.Deliveries, func(a, b deliveryRecord) int { return cmp.Compare(a.At, b.At) })
		if err := putKeyRecord(tx, kid, *r); err != nil {
			return err
		}
	}
	for _, name := range [][]byte{oldBucketKeyJobs, oldBucketDeliveries} {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return fmt.Errorf("migrate: drop bucket %s: %w", name, err)
			}
		}
	}
	return nil
}

// addRequest appends r to the job's requests.
func addRequest(tx *bolt.Tx, jobID string, r Request) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode request for job %s: %w", jobID, err)
	}
	prefix := []byte(jobID)
	c := tx.Bucket(bucketRequests).Cursor()
	// The first key after the job's rows; the row before it is the last one.
	k, _ := c.Seek(append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	var next uint32
	if k != nil && len(k) == len(prefix)+4 && string(k[:len(prefix)]) == jobID {
		next = binary.BigEndian.Uint32(k[len(prefix):]) + 1
	}
	return tx.Bucket(bucketRequests).Put(binary.BigEndian.AppendUint32(prefix, next), data)
}
