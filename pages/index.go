package pages

import "math/bits"

// The free-space indexes. A Pool keeps its free runs in exactly one of them,
// chosen at New:
//
//   - bySize (best fit, the default): one list of free runs per run length,
//     and a bitset over lengths marking the non-empty lists. The best fit
//     for n pages is the first set bit at or after n: a few word operations
//     per level of the bitset, with 64 lengths per word and at most five
//     levels (2^30 pages). Insert and remove are O(1) list operations plus
//     a bit flip that climbs a level only when a word turns empty or
//     non-empty.
//   - byAddr (first fit): a max segment tree over page indices, whose leaf
//     i holds the length of the free run that starts at page i (0 if none).
//     The first fit for n pages is the leftmost leaf holding at least n,
//     found by one descent; insert and remove update one leaf and climb
//     while the parent's maximum changes. Both are O(log pages).
//
// Neither allocates after New: list links live in the page metadata, and
// the bitset and the tree are sized for the whole region up front. The
// standard library has no ordered structure that fits (container/heap
// cannot remove arbitrary runs cheaply, and a balanced tree would allocate
// a node per insert); these two are the textbook structures for the job,
// each under a hundred lines.

// none marks an empty list or a missing neighbour.
const none = -1

// bitset is a hierarchical bitset: level 0 holds one bit per element, and
// bit i of level l+1 is set iff word i of level l is non-zero. The top level
// is a single word.
type bitset struct {
	levels [][]uint64
}

func newBitset(n int) bitset {
	var s bitset
	for {
		words := (n + 63) / 64
		s.levels = append(s.levels, make([]uint64, words))
		if words == 1 {
			return s
		}
		n = words
	}
}

func (s *bitset) set(i int) {
	for _, lv := range s.levels {
		w := i >> 6
		was := lv[w]
		lv[w] = was | 1<<(i&63)
		if was != 0 {
			return
		}
		i = w
	}
}

func (s *bitset) clear(i int) {
	for _, lv := range s.levels {
		w := i >> 6
		lv[w] &^= 1 << (i & 63)
		if lv[w] != 0 {
			return
		}
		i = w
	}
}

// next returns the smallest set element >= i, or none.
func (s *bitset) next(i int) int {
	for l, lv := range s.levels {
		w := i >> 6
		if w >= len(lv) {
			return none
		}
		if m := lv[w] & (^uint64(0) << (i & 63)); m != 0 {
			i = w<<6 | bits.TrailingZeros64(m)
			for l--; l >= 0; l-- {
				i = i<<6 | bits.TrailingZeros64(s.levels[l][i])
			}
			return i
		}
		i = w + 1
	}
	return none
}

// last returns the largest set element, or none.
func (s *bitset) last() int {
	top := len(s.levels) - 1
	if s.levels[top][0] == 0 {
		return none
	}
	i := 63 - bits.LeadingZeros64(s.levels[top][0])
	for l := top - 1; l >= 0; l-- {
		i = i<<6 | (63 - bits.LeadingZeros64(s.levels[l][i]))
	}
	return i
}

// bySize is the best-fit index: free runs in one doubly linked list per
// length (links in page.prev and page.next of each run's first page), and a
// bitset of the lengths whose list is non-empty.
type bySize struct {
	heads []int32 // heads[n]: the first free run of n pages, or none
	sizes bitset
}

func newBySize(pages int) bySize {
	x := bySize{heads: make([]int32, pages+1), sizes: newBitset(pages + 1)}
	for i := range x.heads {
		x.heads[i] = none
	}
	return x
}

// insert adds the free run of n pages starting at s at the front of its
// list: among runs of equal length, the last one freed is reused first.
func (x *bySize) insert(meta []page, s int32, n int) {
	h := x.heads[n]
	meta[s].prev, meta[s].next = none, h
	if h == none {
		x.sizes.set(n)
	} else {
		meta[h].prev = s
	}
	x.heads[n] = s
}

func (x *bySize) remove(meta []page, s int32, n int) {
	p, nx := meta[s].prev, meta[s].next
	if p == none {
		x.heads[n] = nx
		if nx == none {
			x.sizes.clear(n)
		}
	} else {
		meta[p].next = nx
	}
	if nx != none {
		meta[nx].prev = p
	}
}

// find returns the first page of a free run of the smallest length >= n,
// or none.
func (x *bySize) find(n int) int32 {
	if l := x.sizes.next(n); l != none {
		return x.heads[l]
	}
	return none
}

// largest returns the length of the longest free run, 0 if none is free.
func (x *bySize) largest() int { return max(x.sizes.last(), 0) }

// byAddr is the first-fit index: a max tree of fan-out 16 over page
// indices. Leaf i (level 0) holds the length of the free run that starts at
// page i, 0 if none; each entry of level k+1 holds the maximum of 16
// entries of level k. Sixteen uint32 entries are one 64-byte cache line, so
// a descent reads one line per level: four levels cover 65,536 pages, where
// a binary tree reads sixteen scattered ones (the reason first fit used to
// be slower than best fit).
type byAddr struct {
	levels [][]uint32 // levels[0] are the leaves; the last level has at most 16 entries
}

// fan is the tree's fan-out: the entries of one cache line.
const fan = 16

func newByAddr(pages int) byAddr {
	var x byAddr
	n := pages
	for {
		n = (n + fan - 1) / fan * fan // whole nodes: a scan never leaves its slice
		x.levels = append(x.levels, make([]uint32, n))
		if n == fan {
			return x
		}
		n /= fan
	}
}

// set makes leaf s hold n and climbs while a node's maximum changes. A
// node is rescanned only when its maximum may have shrunk (the entry that
// changed held it); a raise, or a change below the maximum, is decided
// from the entry alone.
func (x *byAddr) set(s int32, n uint32) {
	i := int(s)
	old := x.levels[0][i]
	x.levels[0][i] = n
	for k := 1; k < len(x.levels); k++ {
		lo := i &^ (fan - 1)
		i /= fan
		pm := x.levels[k][i]
		m := n
		switch {
		case n >= pm:
		case old < pm:
			return // the maximum is elsewhere in the node and stays
		default:
			m = nodeMax((*[fan]uint32)(x.levels[k-1][lo : lo+fan]))
		}
		if m == pm {
			return
		}
		x.levels[k][i] = m
		old, n = pm, m
	}
}

// nodeMax is the largest of a node's entries.
func nodeMax(node *[fan]uint32) uint32 {
	m := node[0]
	for _, v := range node[1:] {
		m = max(m, v)
	}
	return m
}

// find returns the first page of the lowest-addressed free run of at least
// n pages, or none.
func (x *byAddr) find(n int) int32 {
	if n > x.largest() {
		return none
	}
	want := uint32(n)
	i := 0 // the node's first entry at the current level
	for k := len(x.levels) - 1; k >= 0; k-- {
		node := (*[fan]uint32)(x.levels[k][i : i+fan])
		j := 0
		for node[j] < want {
			j++ // the parent's maximum is at least want: some entry is
		}
		i = (i + j) * fan
	}
	return int32(i / fan)
}

// largest returns the length of the longest free run.
func (x *byAddr) largest() int {
	return int(nodeMax((*[fan]uint32)(x.levels[len(x.levels)-1])))
}
