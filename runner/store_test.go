package runner

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestStoreEventsKeepOrder(t *testing.T) {
	dir := t.TempDir()
	s := mustStore(t, dir)
	q := mustQueue(t, s, newFakeExec(), 1)
	job := mustEnqueue(t, q, req(key(1), "d1", "")).Job
	ctx := context.Background()
	type ev struct {
		Kind string `json:"kind"`
		N    int    `json:"n"`
	}
	for i := range 5 {
		if err := s.AppendEvent(ctx, job.ID, ev{"step", i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustStore(t, dir)
	events, err := s.Events(job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, raw := range events {
		var e ev
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.N)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("events after reopen %v; want 0..4 in order", got)
	}
	if events, err := s.Events("no-such-job"); err != nil || len(events) != 0 {
		t.Fatalf("Events(unknown) = %v, %v; want none", events, err)
	}
}

func TestStoreAppendEventErrors(t *testing.T) {
	s := mustStore(t, t.TempDir())
	ctx := context.Background()
	if err := s.AppendEvent(ctx, "no-such-job", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("AppendEvent(unknown job) = %v; want ErrNotFound", err)
	}
	q := mustQueue(t, s, newFakeExec(), 1)
	job := mustEnqueue(t, q, req(key(1), "d1", "")).Job
	if err := s.AppendEvent(ctx, job.ID, func() {}); err == nil || !strings.Contains(err.Error(), "encode") {
		t.Errorf("AppendEvent(func) = %v; want an encode error", err)
	}
}

// Concurrent writes share transactions; one that fails must not take the
// others with it.
func TestStoreGroupCommitIsolatesFailures(t *testing.T) {
	s := mustStore(t, t.TempDir())
	q := mustQueue(t, s, newFakeExec(), 1)
	job := mustEnqueue(t, q, req(key(1), "d1", "")).Job
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			id := job.ID
			if i%2 == 1 {
				id = "missing"
			}
			errs[i] = s.AppendEvent(ctx, id, i)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("append %d: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, ErrNotFound) {
			t.Errorf("append %d to a missing job: %v; want ErrNotFound", i, err)
		}
	}
	events, err := s.Events(job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 100 {
		t.Fatalf("%d events stored; want 100", len(events))
	}
}

func TestStoreOnce(t *testing.T) {
	dir := t.TempDir()
	s := mustStore(t, dir)
	ctx := context.Background()
	tests := []struct {
		name  string
		first bool
	}{
		{"reply:octo/hello#1:mallory", true},
		{"reply:octo/hello#1:mallory", false},
		{"reply:octo/hello#2:mallory", true},
	}
	for _, tt := range tests {
		if first, err := s.Once(ctx, tt.name); err != nil || first != tt.first {
			t.Fatalf("Once(%q) = %v, %v; want %v", tt.name, first, err, tt.first)
		}
	}
	if _, err := s.Once(ctx, ""); err == nil {
		t.Error("Once(\"\") = nil error; want one")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustStore(t, dir)
	if first, err := s.Once(ctx, "reply:octo/hello#1:mallory"); err != nil || first {
		t.Fatalf("Once after reopen = %v, %v; want false", first, err)
	}
}

func TestStoreJobIDsSortAndAreUnique(t *testing.T) {
	s := mustStore(t, t.TempDir())
	now := time.Date(2026, 11, 21, 14, 23, 0, 0, time.UTC)
	seen := make(map[string]bool)
	prev := ""
	for i := range 1000 {
		at := now
		if i == 500 {
			at = now.Add(-time.Hour) // the clock went back
		}
		id := s.newJobID(at)
		if id <= prev || seen[id] {
			t.Fatalf("id %d %q after %q; want strictly increasing and unique", i, id, prev)
		}
		seen[id], prev = true, id
	}
	if !strings.HasPrefix(prev, "20261121T142300.") {
		t.Errorf("id %q; want it to start with the creation time", prev)
	}
	if got := idTime(prev); got.Before(now) || got.After(now.Add(time.Second)) {
		t.Errorf("idTime(%q) = %v; want about %v", prev, got, now)
	}
}

func TestStoreOpenErrors(t *testing.T) {
	if _, err := OpenStore(""); err == nil || !strings.Contains(err.Error(), "store.path") {
		t.Errorf("OpenStore(\"\") = %v; want an error naming store.path", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(file); err == nil {
		t.Error("OpenStore(a file) = nil error; want one")
	}
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, StoreFile), []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(corrupt); err == nil || !strings.Contains(err.Error(), StoreFile) {
		t.Errorf("OpenStore(corrupt) = %v; want an error naming the file", err)
	}
}

func TestStoreInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the lock timeout")
	}
	dir := t.TempDir()
	mustStore(t, dir)
	_, err := OpenStore(dir)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second OpenStore = %v; want an error saying it is in use", err)
	}
}

func TestStoreClosed(t *testing.T) {
	s := mustStore(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v; want nil", err)
	}
	if _, err := s.Once(context.Background(), "x"); err == nil {
		t.Error("Once after Close = nil error; want one")
	}
	if _, err := s.Job("x"); err == nil {
		t.Error("Job after Close = nil error; want one")
	}
}

// BenchmarkEnqueue measures Enqueue on a disk-backed store from parallel
// callers (webhook deliveries), reporting the 99th percentile latency.
func BenchmarkEnqueue(b *testing.B) {
	s := mustStore(b, b.TempDir())
	q := mustQueue(b, s, newFakeExec(), 1)
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	var n int64
	var nmu sync.Mutex
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			nmu.Lock()
			n++
			i := n
			nmu.Unlock()
			start := time.Now()
			_, err := q.Enqueue(ctx, req(key(int(i)), fmt.Sprint("delivery-", i), "do the thing"))
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
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	}
}

// BenchmarkEnqueueAt500PerSecond sends b.N deliveries at a steady 500 per
// second (the webhook target) for 50 issues and reports Enqueue's latency
// percentiles: with no queue running (requests pile up, coalesced per key),
// and with jobs that finish at once (each request also costs a start and a
// finish write). Run it with a fixed count, such as -benchtime 5000x.
func BenchmarkEnqueueAt500PerSecond(b *testing.B) {
	b.Run("queue-stopped", func(b *testing.B) { benchEnqueueAt(b, 500, false) })
	b.Run("jobs-instant", func(b *testing.B) { benchEnqueueAt(b, 500, true) })
}

func benchEnqueueAt(b *testing.B, perSecond int, run bool) {
	s := mustStore(b, b.TempDir())
	q := mustQueue(b, s, ExecutorFunc(func(context.Context, *Job) error { return nil }), 4)
	if run {
		mustRun(b, q)
	}
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Go(func() {
			start := time.Now()
			_, err := q.Enqueue(ctx, req(key(i%50+1), fmt.Sprint("delivery-", i), "do the thing"))
			lat[i] = time.Since(start)
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkStoreCommitFloor is the floor under Enqueue's latency on this
// disk: one bare bbolt transaction at a time writing five small values (as
// Enqueue does), without the queue's logic.
func BenchmarkStoreCommitFloor(b *testing.B) {
	s := mustStore(b, b.TempDir())
	lat := make([]time.Duration, 0, b.N)
	value := make([]byte, 200)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		err := s.db.Update(func(tx *bolt.Tx) error {
			k := []byte(fmt.Sprint("floor-", i))
			for _, name := range allBuckets[:5] {
				if err := tx.Bucket(name).Put(k, value); err != nil {
					return err
				}
			}
			return nil
		})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkEnqueueSequential is Enqueue one call at a time, to compare with
// BenchmarkStoreCommitFloor.
func BenchmarkEnqueueSequential(b *testing.B) {
	s := mustStore(b, b.TempDir())
	q := mustQueue(b, s, newFakeExec(), 1)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		_, err := q.Enqueue(b.Context(), req(key(i+1), fmt.Sprint("delivery-", i), "do the thing"))
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func TestStoreWritePanicIsAnError(t *testing.T) {
	s := mustStore(t, t.TempDir())
	err := s.update(context.Background(), func(*bolt.Tx) error { panic("bad write") })
	if err == nil || !strings.Contains(err.Error(), "bad write") {
		t.Fatalf("update(panicking fn) = %v; want an error naming the panic", err)
	}
	// The store still takes writes.
	if first, err := s.Once(context.Background(), "after panic"); err != nil || !first {
		t.Fatalf("Once after a panicked write = %v, %v; want true", first, err)
	}
}

// TestStoreMigratesKeyIndexes opens a store written with the first layout,
// which had the keyjobs and deliveries buckets, and checks that its jobs
// are still listed by key, its deliveries still de-duplicated, and the old
// buckets gone.
func TestStoreMigratesKeyIndexes(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, StoreFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	jobs := []*Job{
		{ID: "20261101T100000.000000-aaaaaaaa", Key: Key{Owner: "Octo", Repo: "Hello", Number: 1}, State: StateSucceeded, CreatedAt: now},
		{ID: "20261101T110000.000000-bbbbbbbb", Key: Key{Owner: "octo", Repo: "hello", Number: 1}, State: StateQueued, CreatedAt: now},
		{ID: "20261101T120000.000000-cccccccc", Key: Key{Owner: "octo", Repo: "hello", Number: 2}, State: StateQueued, CreatedAt: now},
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketJobs, bucketRequests, oldBucketKeyJobs, bucketHeads, oldBucketDeliveries, bucketEvents, bucketOnce} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		deliveries := tx.Bucket(oldBucketDeliveries)
		for i, job := range jobs {
			job.Requests = []Request{{Key: job.Key, DeliveryID: fmt.Sprint("d", i), Instruction: fmt.Sprint("do ", i)}}
			if err := putJob(tx, job); err != nil {
				return err
			}
			if err := addRequest(tx, job.ID, job.Requests[0]); err != nil {
				return err
			}
			if err := tx.Bucket(oldBucketKeyJobs).Put([]byte(keyID(job.Key)+"\x00"+job.ID), nil); err != nil {
				return err
			}
			v := binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
			if err := deliveries.Put([]byte(job.Requests[0].DeliveryID), append(v, job.ID...)); err != nil {
				return err
			}
		}
		// A delivery of a job that no longer exists is dropped.
		v := binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
		if err := deliveries.Put([]byte("orphan"), append(v, "20260101T000000.000000-dddddddd"...)); err != nil {
			return err
		}
		return putHead(tx, keyID(jobs[1].Key), head{Queued: []string{jobs[1].ID}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustStore(t, dir)
	got, err := s.Jobs(key(1))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if want := []string{jobs[0].ID, jobs[1].ID}; !slices.Equal(ids, want) {
		t.Fatalf("Jobs(octo/hello#1) after migration = %v; want %v", ids, want)
	}
	q := mustQueue(t, s, newFakeExec(), 1)
	for i, job := range jobs {
		res := mustEnqueue(t, q, req(job.Key, fmt.Sprint("d", i), "again"))
		if !res.Duplicate || res.Job == nil || res.Job.ID != job.ID {
			t.Fatalf("redelivery of d%d after migration = %+v; want a duplicate of %s", i, res, job.ID)
		}
	}
	// The queued job still takes follow-ups.
	if res := mustEnqueue(t, q, req(key(1), "d-new", "more")); !res.Coalesced || res.Job.ID != jobs[1].ID {
		t.Fatalf("follow-up after migration = %+v; want coalesced into %s", res, jobs[1].ID)
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{oldBucketKeyJobs, oldBucketDeliveries} {
			if tx.Bucket(name) != nil {
				return fmt.Errorf("bucket %s is still there", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStoreForgetsOldDeliveriesOnWrite checks that a key's record does not
// grow with every delivery: those past DeliveryRetention go when the next
// one is recorded.
func TestStoreForgetsOldDeliveriesOnWrite(t *testing.T) {
	var r keyRecord
	old := time.Now().Add(-DeliveryRetention - time.Hour)
	r.addDelivery("old", "job-1", old)
	r.addDelivery("new", "job-2", time.Now())
	if _, seen := r.delivery("old"); seen {
		t.Fatal("a delivery older than the retention is still remembered")
	}
	if id, seen := r.delivery("new"); !seen || id != "job-2" {
		t.Fatalf("delivery(new) = %q, %v; want job-2", id, seen)
	}
}

// TestStoreMalformedKeyRecord checks that a damaged record of one key
// neither stops the store from opening (pruning skips it) nor is silently
// replaced: an enqueue for that key fails and names it, and other keys
// work.
func TestStoreMalformedKeyRecord(t *testing.T) {
	dir := t.TempDir()
	s := mustStore(t, dir)
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKeys).Put([]byte(keyID(key(1))), []byte(`{"deliveries": [oops`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustStore(t, dir)
	q := mustQueue(t, s, newFakeExec(), 1)
	_, err = q.Enqueue(context.Background(), req(key(1), "d1", "x"))
	if err == nil || !strings.Contains(err.Error(), "octo/hello#1") {
		t.Fatalf("enqueue on a damaged record: %v; want an error naming the key", err)
	}
	mustEnqueue(t, q, req(key(2), "d2", "y"))
}

// TestStoreRefusesNewerLayout checks that a store written by a later
// gohands, with a layout this one does not know, is refused by name
// instead of being misread, and is left as it was.
func TestStoreRefusesNewerLayout(t *testing.T) {
	dir := t.TempDir()
	s := mustStore(t, dir)
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaLayout, []byte(strconv.Itoa(storeLayout+1)))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = OpenStore(dir)
	if err == nil || !strings.Contains(err.Error(), "newer gohands") {
		t.Fatalf("OpenStore of a newer layout: %v; want it refused", err)
	}
	db, err := bolt.Open(filepath.Join(dir, StoreFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaLayout); string(v) != strconv.Itoa(storeLayout+1) {
			t.Errorf("layout after the refused open = %q", v)
		}
		return nil
	})
}
