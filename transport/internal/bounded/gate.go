// Package bounded holds what the bounded transports, transport/sharded and
// transport/shared, share, so that each keeps only its own queue mechanics:
//
//   - Config and Build: their options, validated by one set of rules with
//     one error shape, every error wrapping pool.ErrInvalidConfig;
//   - Gate and Endpoint: the transport's and each producer's closed flags,
//     and the counters that do not depend on how items are queued
//     (producers, full TrySends, waits);
//   - Parking: where producers wait for room in a full queue, and how the
//     owner wakes them without losing a wake-up.
//
// A transport embeds one Gate and one Parking per queue that producers can
// wait on (sharded: one per producer queue; shared: one for the whole
// queue).
package bounded

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
)

// Gate is a bounded transport's closed flag and its queue-independent
// counters. The zero value is open and counts nothing; a Gate must not be
// copied after first use.
//
// Closing: Close sets the flag once. Every send path loads it (Closed) before
// it enqueues, and a producer waiting for room re-checks it each time it
// wakes. Close itself wakes nobody: the transport then calls WakeAll on every
// Parking its producers may wait on. Because Close stores the flag before
// those WakeAll calls load their waiter counts, and a waiter counts itself
// before it loads the flag (both sequentially consistent sync/atomic
// operations), either the waiter sees the flag or WakeAll sees the waiter.
type Gate struct {
	closed atomic.Bool // read by every send
	_      cpu.CacheLinePad

	producers atomic.Int64  // made and not yet closed
	full      atomic.Uint64 // TrySend calls that returned pool.ErrFull
	blocked   atomic.Uint64 // Wait calls: a Send found its queue full
	_         cpu.CacheLinePad
}

// Counts are a Gate's counters.
type Counts struct {
	Producers int    // producers made and not yet closed
	Full      uint64 // TrySend calls that returned pool.ErrFull
	Blocked   uint64 // times a Send found its queue full and waited
}

// Closed reports whether Close has been called.
func (g *Gate) Closed() bool { return g.closed.Load() }

// Close closes the gate; closing it again does nothing. The caller then
// wakes every Parking of the transport, on every call, so that a Close that
// returns has released every parked producer even if another Close set the
// flag first.
func (g *Gate) Close() { g.closed.Store(true) }

// Open counts a producer made by NewProducer and returns its endpoint.
func (g *Gate) Open() Endpoint {
	g.producers.Add(1)
	return Endpoint{gate: g}
}

// Full counts a TrySend that returned pool.ErrFull.
func (g *Gate) Full() { g.full.Add(1) }

// Counts returns the counters. Each only grows except Producers.
func (g *Gate) Counts() Counts {
	return Counts{
		Producers: int(max(g.producers.Load(), 0)),
		Full:      g.full.Load(),
		Blocked:   g.blocked.Load(),
	}
}

// Wait parks the calling producer on p until room reports true or the gate
// closes, and counts one wait. It returns nil when there is room and
// pool.ErrClosed once the gate is closed, even if room appeared too. room
// must load the state that the owner stores before it calls Wake on p.
//
// Wait does not spin: it sleeps on p's condition variable. See Parking for
// why no wake-up is lost.
func (g *Gate) Wait(p *Parking, room func() bool) error {
	g.blocked.Add(1)
	p.mu.Lock()
	if p.cond.L == nil { // a zero Parking is ready to use
		p.cond.L = &p.mu
	}
	p.waiting.Add(1)
	for !g.closed.Load() && !room() {
		p.cond.Wait()
	}
	p.waiting.Add(-1)
	p.mu.Unlock()
	if g.closed.Load() {
		return pool.ErrClosed
	}
	return nil
}

// Endpoint is a producer's share of closing: its own closed flag, and its
// transport's Gate. The zero Endpoint belongs to no transport. Like the
// producer that holds it, it is used by one goroutine at a time.
type Endpoint struct {
	gate   *Gate
	closed bool // Close was called
}

// Check returns nil if the producer may send: none if the endpoint belongs to
// no transport (a zero Producer), pool.ErrClosed once the producer or its
// transport is closed.
func (e *Endpoint) Check(none error) error {
	if e.gate == nil {
		return none
	}
	if e.closed || e.gate.Closed() {
		return pool.ErrClosed
	}
	return nil
}

// Close closes the endpoint and uncounts its producer; it reports whether
// this call did, false for a closed or zero endpoint. The caller calls it
// after the producer's last send.
func (e *Endpoint) Close() bool {
	if e.gate == nil || e.closed {
		return false
	}
	e.closed = true
	e.gate.producers.Add(-1)
	return true
}

// Parking is where the producers of one queue wait for room (Gate.Wait) and
// where the owner wakes them (Wake, WakeAll). The zero value is ready to use;
// a Parking must not be copied after first use.
//
// No wake-up is lost. A waiter holds mu from the moment it counts itself in
// waiting until sync.Cond.Wait has queued it and released mu, and it loads
// the queue's state (room) after counting itself. The owner stores the new
// state before it loads waiting in Wake. Of the waiter's (add to waiting,
// load state) and the owner's (store state, load waiting) at least one sees
// the other's write, because sync/atomic operations are sequentially
// consistent: either the waiter sees the room and does not sleep, or the
// owner sees the waiter and, since it can take mu only once the waiter is
// queued in the condition variable, signals it. A woken waiter re-checks the
// room and sleeps again if another producer took it first.
type Parking struct {
	waiting atomic.Int64 // producers inside Gate.Wait
	mu      sync.Mutex
	cond    sync.Cond
}

// Wake wakes up to n producers waiting on p, all of them if n is at least
// their number. It costs one atomic load when nobody waits. Only the owner
// calls it, after it made room for n items.
func (p *Parking) Wake(n int) {
	if p.waiting.Load() != 0 {
		p.wake(n)
	}
}

// WakeAll wakes every producer waiting on p: the owner made room for all of
// them, or the gate closed.
func (p *Parking) WakeAll() {
	if p.waiting.Load() != 0 {
		p.wake(-1)
	}
}

func (p *Parking) wake(n int) {
	p.mu.Lock()
	if w := p.waiting.Load(); n < 0 || int64(n) >= w {
		p.cond.Broadcast()
	} else {
		for range n {
			p.cond.Signal()
		}
	}
	p.mu.Unlock()
}
