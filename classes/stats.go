package classes

import "github.com/locus-go/locus/pool"

// Stats is a snapshot of an allocator's accounting: one ClassStats per
// class, smallest class first, and the handles refused for naming no
// class. Each class's pool.Stats identities hold, and
//
//	Requested <= Allocs × BlockSize, per class
//
// Pool.Stats returns the counts as they are now, to the owner; Pool.Snapshot
// returns them as the owner last published them, to any goroutine.
type Stats struct {
	Classes []ClassStats
	// Rejected counts handles refused because their class index names no
	// class of this allocator, by the owner or by senders. Handles refused
	// by a class's pool are counted in that class's Rejected.
	Rejected uint64
}

// ClassStats is one class's accounting: its pool's stats and the bytes its
// allocations asked for.
type ClassStats struct {
	pool.Stats
	// Requested is the sum of the sizes passed to Alloc for the blocks this
	// class handed out, over all allocations so far.
	Requested uint64
}

// HandedOut returns the bytes this class has handed out over all
// allocations so far: Allocs × BlockSize.
func (s ClassStats) HandedOut() uint64 { return s.Allocs * uint64(s.BlockSize) }

// InternalFragmentation returns the share of the bytes handed out that the
// allocations did not ask for, 1 - Requested/HandedOut, over all
// allocations so far; 0 before the first.
func (s ClassStats) InternalFragmentation() float64 {
	return waste(s.Requested, s.HandedOut())
}

// Requested returns the bytes asked for, summed over the classes.
func (s Stats) Requested() uint64 {
	var n uint64
	for _, c := range s.Classes {
		n += c.Requested
	}
	return n
}

// HandedOut returns the bytes handed out, summed over the classes.
func (s Stats) HandedOut() uint64 {
	var n uint64
	for _, c := range s.Classes {
		n += c.HandedOut()
	}
	return n
}

// InternalFragmentation returns 1 - Requested/HandedOut over all classes.
func (s Stats) InternalFragmentation() float64 { return waste(s.Requested(), s.HandedOut()) }

// Live returns the blocks allocated and not yet freed, over all classes.
func (s Stats) Live() int {
	n := 0
	for _, c := range s.Classes {
		n += c.Live
	}
	return n
}

func waste(requested, handedOut uint64) float64 {
	if handedOut == 0 {
		return 0
	}
	return 1 - float64(requested)/float64(handedOut)
}
