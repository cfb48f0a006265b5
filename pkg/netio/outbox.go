// Package netio moves frames between the proxy's sockets and its
// goroutines: Outbox is the batching writer shared by the client side
// (answers) and the backend side (requests), and Wrap gives a TCP socket
// reads and writes that cost one system call each and nothing more.
//
// It owns no connection and knows no request: it must not decide when a
// connection dies (a write error is returned to the owner, who closes)
// nor what a frame means.
package netio

import (
	"sync"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// Out is one whole frame queued on an Outbox.
type Out struct {
	F []byte
	// Buf, when set, holds F and is released once F is written or
	// dropped; when nil the caller keeps owning F (a request frame that
	// may be sent again).
	Buf *frame.Buf
}

// Hooks let an Outbox's owner act on its batches; any may be nil.
type Hooks struct {
	// Taken is called with the owner's lock held with each batch taken
	// off the queue, right before it is written: what it marks there is
	// ordered before the write.
	Taken func(batch []Out)
	// BeforeWrite is called before each write, without the lock, by the
	// goroutine that writes (a write deadline is armed there).
	BeforeWrite func()
	// Written is called after each batch with its bytes, without the lock,
	// whether or not the write succeeded.
	Written func(n int)
}

// Outbox queues whole frames for one socket from any goroutine and writes
// them in batches. Whichever goroutine finds it idle (Flush) writes
// everything queued, and everything queued by others meanwhile, one
// frame.Writer flush (one write system call) per batch; the others only
// append. A burst of frames from many goroutines thus costs one syscall,
// and a lone frame costs no hand-off to a writer goroutine.
//
// It is guarded by its owner's lock (Init), so that the owner can queue a
// frame and update its own state (a stream id, a byte count) in one
// critical section: methods named ...Locked expect the lock held.
type Outbox struct {
	mu      sync.Locker
	idle    sync.Cond // signalled when writing turns false
	queue   []Out
	spare   []Out // the other half of the double buffer
	queued  int   // bytes queued and not yet written
	writing bool  // a goroutine is writing; it alone touches w
	closed  bool
	w       *frame.Writer
	hooks   Hooks
}

// Init makes o write to w under the owner's lock mu. It must be called
// before any other method.
func (o *Outbox) Init(mu sync.Locker, w *frame.Writer, hooks Hooks) {
	o.mu, o.w, o.hooks = mu, w, hooks
	o.idle.L = mu
}

// PushLocked queues f and reports whether the queue was empty before (no
// flush is pending: the caller must make sure one comes). A closed Outbox
// drops f (releasing its Buf) and reports false.
func (o *Outbox) PushLocked(f Out) (first bool) {
	if o.closed {
		f.Buf.Release()
		return false
	}
	o.queue = append(o.queue, f)
	o.queued += len(f.F)
	return len(o.queue) == 1
}

// QueuedLocked returns the bytes queued and not yet written, the batch
// being written included.
func (o *Outbox) QueuedLocked() int { return o.queued }

// Flush writes what is queued until the queue stays empty, unless another
// goroutine is writing already (it writes this too) or nothing is queued.
// It returns the first write error; the Outbox then stays unusable (every
// later Flush fails the same way) and the owner should close.
func (o *Outbox) Flush() error {
	o.mu.Lock()
	err := o.flushLocked()
	o.mu.Unlock()
	return err
}

// FlushAll writes everything queued and returns once the queue is empty:
// unlike Flush it waits for a write under way by another goroutine
// rather than leaving the rest to it, so that the caller may close the
// socket after it without cutting off what was queued. A peer that does
// not read holds it until the socket's write deadline.
func (o *Outbox) FlushAll() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		o.WaitIdleLocked()
		if err := o.flushLocked(); err != nil || o.closed || len(o.queue) == 0 {
			return err
		}
	}
}

// flushLocked is Flush with the lock held; it drops the lock around each
// write so that other goroutines only append meanwhile.
func (o *Outbox) flushLocked() error {
	if o.writing || o.closed || len(o.queue) == 0 {
		return nil
	}
	o.writing = true
	var err error
	for len(o.queue) > 0 && !o.closed && err == nil {
		batch := o.queue
		o.queue = o.spare[:0]
		if o.hooks.Taken != nil {
			o.hooks.Taken(batch)
		}
		o.mu.Unlock()
		if o.hooks.BeforeWrite != nil {
			o.hooks.BeforeWrite()
		}
		n := 0
		for i, f := range batch {
			if err == nil {
				err = o.w.WriteFrame(f.F)
			}
			n += len(f.F)
			f.Buf.Release()
			batch[i] = Out{}
		}
		if err == nil {
			err = o.w.Flush()
		}
		if o.hooks.Written != nil {
			o.hooks.Written(n)
		}
		o.mu.Lock()
		// Counted until written: a peer that stops reading in the middle
		// of a batch holds that batch too.
		o.queued -= n
		o.spare = batch[:0]
	}
	o.writing = false
	o.idle.Broadcast()
	return err
}

// WaitIdleLocked waits, with the lock held, until no goroutine is writing:
// from then on no frame is being read by a writer.
func (o *Outbox) WaitIdleLocked() {
	for o.writing {
		o.idle.Wait()
	}
}

// CloseLocked stops the Outbox: later pushes are dropped, a write under
// way ends after its batch, and what is still queued is returned (the
// caller releases or fails it; its bytes no longer count as queued).
func (o *Outbox) CloseLocked() []Out {
	o.closed = true
	q := o.queue
	o.queue = nil
	for _, f := range q {
		o.queued -= len(f.F)
	}
	return q
}
