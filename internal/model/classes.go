package model

// Class is one size class of the size-class model.
type Class struct{ Size, Blocks int }

// ClassCounts are the counts of one class's stats.
type ClassCounts struct {
	Live, Free, HighWater                                              int
	Allocs, Frees, Requested, RemoteSubmitted, RemoteDrained, Rejected uint64
}

// Block is a live block of the size-class model; Key is the allocator's
// handle of it.
type Block[K comparable] struct {
	Key   K
	Class int
	Index int  // the block's index in its class
	N     int  // the bytes asked for
	Tag   byte // what the caller wrote into it
	at    int  // its index in Blocks
}

// Sizes is the model of a size-class allocator (package classes): the
// live blocks with what was written into them, and every class's counts.
type Sizes[K comparable] struct {
	Classes  []Class
	Counts   []ClassCounts
	Rejected uint64 // handles naming no class
	Live     map[K]*Block[K]
	Blocks   []*Block[K] // the live blocks, in no order
	Taken    [][]bool    // class, block index -> a live handle holds it
	Stale    []K         // freed handles, the latest StaleKeep
	Pending  [][]K       // per class: remote frees sent and not yet drained, in order
}

// NewSizes returns the model of an allocator of the classes cls, every
// block free.
func NewSizes[K comparable](cls []Class) *Sizes[K] {
	m := &Sizes[K]{Classes: cls, Counts: make([]ClassCounts, len(cls)), Live: map[K]*Block[K]{}, Taken: make([][]bool, len(cls)), Pending: make([][]K, len(cls))}
	for k, cl := range cls {
		m.Counts[k].Free = cl.Blocks
		m.Taken[k] = make([]bool, cl.Blocks)
	}
	return m
}

// ClassFor returns the class an allocation of n bytes takes: the smallest
// that holds it, or -1.
func (m *Sizes[K]) ClassFor(n int) int {
	for k, cl := range m.Classes {
		if n > 0 && n <= cl.Size {
			return k
		}
	}
	return -1
}

// Largest returns the size of the largest class.
func (m *Sizes[K]) Largest() int { return m.Classes[len(m.Classes)-1].Size }

// Add adds block idx of class k, allocated for n bytes, now key's.
func (m *Sizes[K]) Add(key K, k, idx, n int, tag byte) *Block[K] {
	b := &Block[K]{Key: key, Class: k, Index: idx, N: n, Tag: tag, at: len(m.Blocks)}
	m.Live[key] = b
	m.Blocks = append(m.Blocks, b)
	m.Taken[k][idx] = true
	w := &m.Counts[k]
	w.Live++
	w.Free--
	w.Allocs++
	w.Requested += uint64(n)
	w.HighWater = max(w.HighWater, w.Live)
	return b
}

// Forget takes b out of the model, freed (remotely, and drained, with
// remote).
func (m *Sizes[K]) Forget(b *Block[K], remote bool) {
	last := m.Blocks[len(m.Blocks)-1]
	m.Blocks[b.at], last.at = last, b.at
	m.Blocks = m.Blocks[:len(m.Blocks)-1]
	delete(m.Live, b.Key)
	m.Taken[b.Class][b.Index] = false
	m.Stale = keep(m.Stale, b.Key)
	w := &m.Counts[b.Class]
	w.Live--
	w.Free++
	w.Frees++
	if remote {
		w.RemoteSubmitted++
		w.RemoteDrained++
	}
}

// Send records a remote free of key, a handle of class k, that the next
// drain of class k delivers (Deliver). Until then the block stays live:
// the owner may still free it, and the drain then refuses the key.
func (m *Sizes[K]) Send(k int, key K) {
	m.Pending[k] = append(m.Pending[k], key)
	m.Counts[k].RemoteSubmitted++
}

// Deliver drains class k's pending remote frees in the order they were
// sent, as the allocator's drain does: a key still live is freed, any
// other (freed meanwhile, or sent twice) refused. It returns how many
// blocks were freed and how many keys refused.
func (m *Sizes[K]) Deliver(k int) (freed, refused int) {
	for _, key := range m.Pending[k] {
		m.Counts[k].RemoteDrained++
		if b, ok := m.Live[key]; ok {
			m.Forget(b, false)
			freed++
		} else {
			m.Refused(k, 1)
			refused++
		}
	}
	m.Pending[k] = m.Pending[k][:0]
	return freed, refused
}

// Refused counts n refusals of a handle of class k, or naming no class
// for k < 0.
func (m *Sizes[K]) Refused(k, n int) {
	if k < 0 {
		m.Rejected += uint64(n)
	} else {
		m.Counts[k].Rejected += uint64(n)
	}
}

// The kinds of SizesOp.
const (
	SizesAlloc     = iota // an allocation of N bytes from Class, by How (0: Alloc, 1: AllocBytes, 2: AllocClass)
	SizesFree             // Free of Blocks[0]
	SizesFreeChunk        // FreeChunk of Blocks
	SizesRemote           // Blocks freed through a sender (one by one with Single) and drained
	SizesStale            // Free of the stale Key
	SizesUnknown          // Free of Blocks[0]'s block as a handle of class Unknown, which does not exist
	SizesDrain            // drains until one brings nothing
)

// SizesOp is one decoded operation on a size-class allocator.
type SizesOp[K comparable] struct {
	Kind          int
	Class, N, How int
	Blocks        []*Block[K]
	Single        bool
	Key           K
	Unknown       int
}

// Next decodes the next operation from src: allocations of every class
// and way, local frees, mixed chunks, remote frees, frees of stale handles
// and of handles naming no class, and drains.
func (m *Sizes[K]) Next(src Source) SizesOp[K] {
	switch op := src.IntN(20); {
	case op < 8 || len(m.Blocks) == 0:
		k := src.IntN(len(m.Classes))
		n := 1 + src.IntN(m.Classes[k].Size)
		return SizesOp[K]{Kind: SizesAlloc, Class: k, N: n, How: src.IntN(3)}
	case op < 11:
		return SizesOp[K]{Kind: SizesFree, Blocks: []*Block[K]{m.Blocks[src.IntN(len(m.Blocks))]}}
	case op < 13:
		return SizesOp[K]{Kind: SizesFreeChunk, Blocks: m.pick(src, 8)}
	case op < 15:
		return SizesOp[K]{Kind: SizesRemote, Blocks: m.pick(src, 8), Single: op == 14}
	case op < 17 && len(m.Stale) > 0:
		return SizesOp[K]{Kind: SizesStale, Key: m.Stale[src.IntN(len(m.Stale))]}
	case op < 18:
		return SizesOp[K]{Kind: SizesUnknown, Blocks: []*Block[K]{m.Blocks[0]}, Unknown: len(m.Classes) + src.IntN(3)}
	default:
		return SizesOp[K]{Kind: SizesDrain}
	}
}

// pick returns from 1 to most distinct live blocks chosen by src.
func (m *Sizes[K]) pick(src Source, most int) []*Block[K] {
	n := 1 + src.IntN(min(most, len(m.Blocks)))
	var bs []*Block[K]
	for _, i := range Perm(src, len(m.Blocks))[:n] {
		bs = append(bs, m.Blocks[i])
	}
	return bs
}
