package model

import "slices"

// Slot is a block of the pool model as one handle holds it; Key is the
// pool's handle of it. A slot outlives its handle: freed, it is stale.
type Slot[K comparable] struct {
	Key   K
	Index int    // the block
	Gen   uint64 // the block's generation while the handle holds it; odd
	Tag   byte   // what the caller wrote into it
}

// Pool is the model of a pool of blocks (package pool): a free list as a
// slice, every block's generation, the handles the owner holds and those
// it gave to senders, and the counters of its Stats. A handle is good
// while its block's generation is the one it was handed out with.
//
// The model hands out blocks in its own reuse order (Due): a caller that
// checks the pool's order compares handles with Due, one that does not
// (the suite's accounting) takes the model's block as a stand-in for the
// pool's, which changes no count.
type Pool[K comparable] struct {
	FIFO     bool
	Gen      []uint64 // block -> generation, odd while live
	FreeList []int    // the free blocks; LIFO takes the last, FIFO the first

	Live     []*Slot[K] // the handles the owner holds, oldest first
	InFlight []*Slot[K] // handles given to senders and not yet drained, in the order given
	Stale    []*Slot[K] // every handle freed, in the order freed (not bounded: a suite's draws depend on its length)

	Allocs, Frees, Rejected uint64
	Submitted               uint64 // handles given to senders
	Drained                 uint64 // handles drains took back, rejected ones too
	HighWater               int
	// Unreported and FirstUnreported are the rejections drains saw that no
	// Drain has reported yet (a drain inside an allocation reports none).
	Unreported      int
	FirstUnreported K

	// What Next decodes. Extended adds the ops only a fuzz target drives
	// (see the Pool kinds). Senders is how many senders a remote free may
	// pick from (one when below 2: nothing is drawn).
	Extended bool
	Senders  int
}

// NewPool returns the model of a pool of n blocks, every one free, that
// reuses blocks last in first out, or first in first out with fifo. A
// fresh pool hands out 0, 1, 2, ... under LIFO and n-1, n-2, ... under
// FIFO.
func NewPool[K comparable](n int, fifo bool) *Pool[K] {
	m := &Pool[K]{FIFO: fifo, Gen: make([]uint64, n)}
	for i := n - 1; i >= 0; i-- {
		m.FreeList = append(m.FreeList, i)
	}
	return m
}

// Count returns how many blocks are live: held by the owner, given to a
// sender, or both.
func (m *Pool[K]) Count() int { return len(m.Gen) - len(m.FreeList) }

// Due returns the block the next allocation takes and the generation of
// its handle. The free list must not be empty.
func (m *Pool[K]) Due() (index int, gen uint64) {
	i := m.FreeList[len(m.FreeList)-1]
	if m.FIFO {
		i = m.FreeList[0]
	}
	return i, m.Gen[i] + 1
}

// Alloc takes the block Due names, now key's, with tag written into it.
func (m *Pool[K]) Alloc(key K, tag byte) *Slot[K] {
	i, gen := m.Due()
	if m.FIFO {
		m.FreeList = m.FreeList[1:]
	} else {
		m.FreeList = m.FreeList[:len(m.FreeList)-1]
	}
	m.Gen[i] = gen
	s := &Slot[K]{Key: key, Index: i, Gen: gen, Tag: tag}
	m.Live = append(m.Live, s)
	m.Allocs++
	m.HighWater = max(m.HighWater, m.Count())
	return s
}

// Newest returns the k handles the owner allocated last, oldest first.
func (m *Pool[K]) Newest(k int) []*Slot[K] { return slices.Clone(m.Live[len(m.Live)-k:]) }

// Good reports whether s's handle is good: its block was not freed since.
func (m *Pool[K]) Good(s *Slot[K]) bool { return m.Gen[s.Index] == s.Gen }

// Free frees s's block locally: the owner's Free of a good handle, held or
// given to a sender (whose copy the drain will reject).
func (m *Pool[K]) Free(s *Slot[K]) {
	m.drop(s)
	m.release(s)
}

// Send gives ss to a sender: the owner's handles leave Live; stale ones
// are sent all the same, for the drain to reject.
func (m *Pool[K]) Send(ss []*Slot[K]) {
	for _, s := range ss {
		m.drop(s)
	}
	m.InFlight = append(m.InFlight, ss...)
	m.Submitted += uint64(len(ss))
}

// Refused counts n calls the pool refused (Stats.Rejected).
func (m *Pool[K]) Refused(n int) { m.Rejected += uint64(n) }

// Landed records that drains took back the k handles given to senders
// first: one sender delivers in the order it was given.
func (m *Pool[K]) Landed(k int) {
	for _, s := range m.InFlight[:k] {
		m.drained(s)
	}
	m.InFlight = m.InFlight[k:]
}

// Delivered records that a drain took back one copy of key, whichever
// sender gave it, and reports whether key was in flight; freed says
// whether the drain freed its block (or rejected the handle).
func (m *Pool[K]) Delivered(key K) (freed, sent bool) {
	i := slices.IndexFunc(m.InFlight, func(s *Slot[K]) bool { return s.Key == key })
	if i < 0 {
		return false, false
	}
	s := m.InFlight[i]
	m.InFlight = slices.Delete(m.InFlight, i, i+1)
	return m.drained(s), true
}

// Report returns the rejections Drain must report now and forgets them.
func (m *Pool[K]) Report() (n int, first K) {
	n, first = m.Unreported, m.FirstUnreported
	var zero K
	m.Unreported, m.FirstUnreported = 0, zero
	return n, first
}

// drained takes back s from a sender: freed if good, else rejected.
func (m *Pool[K]) drained(s *Slot[K]) bool {
	m.Drained++
	if m.Good(s) {
		m.release(s)
		return true
	}
	m.Rejected++
	if m.Unreported == 0 {
		m.FirstUnreported = s.Key
	}
	m.Unreported++
	return false
}

func (m *Pool[K]) release(s *Slot[K]) {
	m.Gen[s.Index]++
	m.FreeList = append(m.FreeList, s.Index)
	m.Stale = append(m.Stale, s)
	m.Frees++
}

// drop takes s out of Live, keeping the order of the rest.
func (m *Pool[K]) drop(s *Slot[K]) {
	if i := slices.Index(m.Live, s); i >= 0 {
		m.Live = slices.Delete(m.Live, i, i+1)
	}
}

// The kinds of PoolOp. The first six are the suite's; Next decodes the
// others only in extended mode.
const (
	PoolAlloc      = iota // an allocation: Alloc, or AllocBytes with How 1 (How is drawn in extended mode only)
	PoolFree              // Free of the owner's Slot
	PoolStale             // a call with the stale Slot: Free, or Bytes with Path 1 (Path is drawn in extended mode only)
	PoolSend              // the N handles the owner allocated last (Newest; a caller may send fewer), freed through sender Sender
	PoolDrain             // a drain
	PoolBytes             // Bytes of the owner's Slot; nil when the owner holds none
	PoolNone              // nothing: the op has nothing to call with (extended mode only)
	PoolAllocChunk        // AllocChunk of N handles, N from 1 to 5, whether or not N are free
	PoolForged            // forged handles: the zero one, block Past beyond the last, a foreign one, and block Index at a generation two past its own
	PoolFreeChunk         // a local FreeChunk of the owner's Slots (none to 3), with the stale Stale after them when it is not nil
	PoolOvertake          // Free of Slot, good and given to a sender: the drain rejects the sender's copy
	PoolSendStale         // the stale Slot freed through sender Sender
	PoolRetire            // sender Sender is closed and a new one made in its place
	PoolSnapshot          // Snapshot after Stats
	PoolStats             // Stats, to compare with the model
)

// PoolOp is one decoded operation on a pool.
type PoolOp[K comparable] struct {
	Kind        int
	How, Path   int
	N           int
	Slot, Stale *Slot[K]
	Slots       []*Slot[K]
	Sender      int
	Index, Past int
}

// Next decodes the next operation from src. The suite's ops are
// allocations, local frees, frees of stale handles, remote frees of the
// handles allocated last, drains and Bytes, drawn exactly as the suite's
// accounting case drew them before it used the decoder, so that a suite
// that seeds its *rand.Rand as before makes the same choices. Extended
// mode draws more (How, Path) and adds AllocChunk, forgeries, mixed
// FreeChunk, a local free overtaking a remote one, remote frees of stale
// handles, retiring senders, Snapshot and Stats.
func (m *Pool[K]) Next(src Source) PoolOp[K] {
	kinds := 10
	if m.Extended {
		kinds = 18
	}
	switch op := src.IntN(kinds); {
	case op < 4:
		o := PoolOp[K]{Kind: PoolAlloc}
		if m.Extended {
			o.How = src.IntN(2)
		}
		return o
	case op < 6 && len(m.Live) > 0:
		return PoolOp[K]{Kind: PoolFree, Slot: m.Live[src.IntN(len(m.Live))]}
	case op < 7 && len(m.Stale) > 0:
		o := PoolOp[K]{Kind: PoolStale, Slot: m.Stale[src.IntN(len(m.Stale))]}
		if m.Extended {
			o.Path = src.IntN(2)
		}
		return o
	case op < 8 && len(m.Live) > 0:
		return PoolOp[K]{Kind: PoolSend, N: 1 + src.IntN(min(len(m.Live), 8)), Sender: m.sender(src)}
	case op < 9:
		return PoolOp[K]{Kind: PoolDrain}
	case op < 10:
		o := PoolOp[K]{Kind: PoolBytes}
		if len(m.Live) > 0 {
			o.Slot = m.Live[src.IntN(len(m.Live))]
		}
		return o
	default:
		return m.extended(op-10, src)
	}
}

// extended decodes the ops of extended mode.
func (m *Pool[K]) extended(op int, src Source) PoolOp[K] {
	switch op {
	case 0:
		return PoolOp[K]{Kind: PoolAllocChunk, N: 1 + src.IntN(5)}
	case 1:
		return PoolOp[K]{Kind: PoolForged, Index: src.IntN(len(m.Gen)), Past: src.IntN(16)}
	case 2:
		o := PoolOp[K]{Kind: PoolFreeChunk, Slots: choose(src, m.Live, src.IntN(min(len(m.Live), 3)+1))}
		if len(m.Stale) > 0 && src.IntN(2) == 0 {
			o.Stale = m.Stale[src.IntN(len(m.Stale))]
		}
		return o
	case 3:
		var good []*Slot[K]
		for _, s := range m.InFlight {
			if m.Good(s) && !slices.Contains(good, s) {
				good = append(good, s)
			}
		}
		if len(good) == 0 {
			return PoolOp[K]{Kind: PoolNone}
		}
		return PoolOp[K]{Kind: PoolOvertake, Slot: good[src.IntN(len(good))]}
	case 4:
		if len(m.Stale) == 0 {
			return PoolOp[K]{Kind: PoolNone}
		}
		return PoolOp[K]{Kind: PoolSendStale, Slot: m.Stale[src.IntN(len(m.Stale))], Sender: m.sender(src)}
	case 5:
		return PoolOp[K]{Kind: PoolRetire, Sender: m.sender(src)}
	case 6:
		return PoolOp[K]{Kind: PoolSnapshot}
	default:
		return PoolOp[K]{Kind: PoolStats}
	}
}

// sender returns the sender a remote op uses, drawn when there are several.
func (m *Pool[K]) sender(src Source) int {
	if m.Senders < 2 {
		return 0
	}
	return src.IntN(m.Senders)
}

// choose returns k distinct elements of list chosen by src, one draw each.
func choose[T any](src Source, list []T, k int) []T {
	rest := slices.Clone(list)
	var out []T
	for range k {
		i := src.IntN(len(rest))
		out = append(out, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	return out
}
