// Package ids hands out the identities that tell one allocator's handles
// (or jobs) from another's: a handle carries its allocator's id, and a
// handle of another allocator fails the check.
package ids

import "sync/atomic"

// Source is a sequence of non-zero 32-bit ids (zero marks a zero value:
// a handle of no allocator). The zero Source is ready to use and safe for
// concurrent use.
//
// Ids are not recycled when an allocator closes: a process would have to
// create 2^32-1 allocators from one Source before an id repeats, and only
// then could a handle of a long-closed allocator pass the foreign check of
// a new one (its generation would still have to match).
type Source struct{ last atomic.Uint32 }

// Next returns the next id, skipping 0 when the sequence wraps.
func (s *Source) Next() uint32 {
	for {
		if id := s.last.Add(1); id != 0 {
			return id
		}
	}
}

// setLast positions the sequence, for tests of the wrap.
func (s *Source) setLast(v uint32) { s.last.Store(v) }
