// Package roster is a transport's list of live producer endpoints (mailboxes,
// queues), in the order they were made. The owner's Drain walks it without a
// lock; producers join it from any goroutine; only the owner removes the
// endpoints of retired producers. Neither joining nor removing allocates,
// except to grow the array, so a producer per request costs later drains
// nothing once it is gone.
package roster

import "sync/atomic"

// List is the live endpoints. The zero List is empty and ready to use.
//
// The caller serialises Add, Compact and every reader other than the owner
// with a mutex of its own (so that it can, say, check a closed flag and add
// under the same lock). The owner reads with Load and no lock.
//
// The endpoints sit in the first n slots of an array that is replaced only
// when it is full. Add writes slot n, then publishes n+1 (and the grown
// array before that), so a reader that loads n before the array always sees
// n filled slots, and a slot below n never changes while the owner reads
// it: only the owner removes endpoints (Compact, from its Drain).
type List[T any] struct {
	slots atomic.Pointer[[]T]
	n     atomic.Int64
}

// Load returns the live endpoints. The owner may call it without the lock;
// the slice stays valid until its next Compact.
func (l *List[T]) Load() []T {
	n := l.n.Load()
	s := l.slots.Load()
	if s == nil {
		return nil
	}
	return (*s)[:n]
}

// Add appends x. The caller holds its lock.
func (l *List[T]) Add(x T) {
	n := int(l.n.Load())
	s := l.slots.Load()
	if s == nil || n == len(*s) {
		grown := make([]T, max(2*n, 4))
		if s != nil {
			copy(grown, *s)
		}
		grown[n] = x
		l.slots.Store(&grown)
	} else {
		(*s)[n] = x
	}
	l.n.Store(int64(n + 1))
}

// Compact removes the endpoints for which drop returns true, keeping the
// order of the rest. Only the owner calls it, holding the caller's lock.
func (l *List[T]) Compact(drop func(T) bool) {
	all := l.Load()
	live := all[:0]
	for _, x := range all {
		if !drop(x) {
			live = append(live, x)
		}
	}
	clear(all[len(live):]) // let the removed endpoints go
	l.n.Store(int64(len(live)))
}
