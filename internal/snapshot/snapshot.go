// Package snapshot carries statistics from an owner goroutine to readers on
// other goroutines (a metrics scraper) at no cost to the owner while nobody
// reads: the owner checks one atomic flag once per scheduling step and
// publishes only when a reader has asked since its last publication.
//
// A reader asks and then waits, bounded, for the owner's next step, so what
// it gets is at most one step old while the owner is busy; from an idle
// owner it gets the last value published.
package snapshot

import (
	"sync"
	"sync/atomic"
	"time"
)

// Cell is one owner's published value. The zero Cell holds the zero T,
// published at no time, and is ready to use. A Cell must not be copied.
//
// Happens-before: Publish stores the value under mu and closes done; a
// reader that returns it read it under mu after the close or the deadline,
// so everything the owner wrote before Publish is visible to the reader.
type Cell[T any] struct {
	want atomic.Bool // a reader waits for a publication; the owner's per-step check

	mu     sync.Mutex
	v      T
	at     time.Time     // when v was published
	done   chan struct{} // closed by the next Publish; nil while nobody waits
	sealed bool          // v is final: Read never waits
}

// Wanted reports whether a reader is waiting for a publication. The owner
// calls it once per step: it is one atomic load.
func (c *Cell[T]) Wanted() bool { return c.want.Load() }

// Init sets the value readers get before the owner's first publication; it
// does not count as fresh, so the first Read asks the owner.
func (c *Cell[T]) Init(v T) {
	c.mu.Lock()
	c.v = v
	c.mu.Unlock()
}

// Publish makes v the value readers get and wakes those that wait.
func (c *Cell[T]) Publish(v T) {
	c.mu.Lock()
	c.publish(v)
	c.mu.Unlock()
}

// Seal publishes v as the final value: later reads return it at once. The
// owner calls it when it closes.
func (c *Cell[T]) Seal(v T) {
	c.mu.Lock()
	c.publish(v)
	c.sealed = true
	c.mu.Unlock()
}

func (c *Cell[T]) publish(v T) {
	c.v = v
	c.at = time.Now()
	c.want.Store(false)
	if c.done != nil {
		close(c.done)
		c.done = nil
	}
}

// The policy every locus owner type uses for its Snapshot: a value published
// in the last Fresh is returned at once; otherwise the reader waits up to
// Wait for the owner's next step.
const (
	Fresh = time.Millisecond
	Wait  = 100 * time.Millisecond
)

// Get is Read(Fresh, Wait).
func (c *Cell[T]) Get() T { return c.Read(Fresh, Wait) }

// Read returns the latest value. If it was published less than fresh ago,
// or sealed, Read returns it at once; otherwise it asks the owner for a new
// one and waits up to wait for it. Any goroutine may call Read, the owner's
// included (it then gets the value at once if it published it within fresh,
// else after wait).
func (c *Cell[T]) Read(fresh, wait time.Duration) T {
	c.mu.Lock()
	if c.sealed || (!c.at.IsZero() && time.Since(c.at) < fresh) || wait <= 0 {
		v := c.v
		c.mu.Unlock()
		return v
	}
	if c.done == nil {
		c.done = make(chan struct{})
	}
	done := c.done
	c.want.Store(true)
	c.mu.Unlock()

	t := time.NewTimer(wait)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()

	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}
