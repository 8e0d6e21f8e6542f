package runner_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gohands/gohands/runner"
)

func ExampleQueue() {
	dir, err := os.MkdirTemp("", "gohands-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := runner.OpenStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	exec := runner.ExecutorFunc(func(ctx context.Context, job *runner.Job) error {
		fmt.Printf("working on %s: %q\n", job.Key, job.Latest().Instruction)
		return nil
	})
	q := runner.NewQueue(store, exec, runner.QueueOptions{Workers: 2})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- q.Run(ctx) }()

	// A webhook handler enqueues and answers 202 at once.
	res, err := q.Enqueue(ctx, runner.Request{
		Key:         runner.Key{Owner: "octo", Repo: "hello", Number: 7},
		DeliveryID:  "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Trigger:     runner.TriggerComment,
		Requester:   "alice",
		Instruction: "add a test for the parser",
	})
	if err != nil {
		log.Fatal(err)
	}
	job, err := q.Wait(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.State, job.Attempts)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// working on octo/hello#7: "add a test for the parser"
	// succeeded 1
}
