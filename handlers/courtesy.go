package handlers

import (
	"context"
	"sync"
	"time"
)

// courtesyTimeout bounds one courtesy call.
const courtesyTimeout = 30 * time.Second

// Courtesy runs the calls a webhook owes GitHub but need not make before it
// is answered — the 👀 reaction, a reply — so the answer does not wait for
// GitHub's API. It is owned by the App: at most limit calls run at once
// (past that a call runs before the answer, as if there were no Courtesy),
// and Wait drains them at shutdown. A nil *Courtesy runs calls at once.
type Courtesy struct {
	wg  sync.WaitGroup
	sem chan struct{}
}

// NewCourtesy returns a Courtesy running at most limit calls at once.
func NewCourtesy(limit int) *Courtesy {
	return &Courtesy{sem: make(chan struct{}, max(limit, 1))}
}

// Go runs f with a context that outlives the webhook's request but not
// courtesyTimeout.
func (c *Courtesy) Go(ctx context.Context, f func(context.Context)) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), courtesyTimeout)
	if c == nil {
		defer cancel()
		f(fctx)
		return
	}
	select {
	case c.sem <- struct{}{}:
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-c.sem }()
			defer cancel()
			f(fctx)
		}()
	default:
		defer cancel()
		f(fctx)
	}
}

// Wait returns when every call started by Go has ended. Call it once no
// more webhooks arrive.
func (c *Courtesy) Wait() {
	if c != nil {
		c.wg.Wait()
	}
}
