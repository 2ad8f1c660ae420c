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

// byAddr is the first-fit index: a max segment tree whose leaf i holds the
// length of the free run starting at page i.
type byAddr struct {
	leaves int      // a power of two >= the number of pages
	t      []uint32 // t[1] is the root; t[leaves+i] is leaf i
}

func newByAddr(pages int) byAddr {
	leaves := 1
	for leaves < pages {
		leaves <<= 1
	}
	return byAddr{leaves: leaves, t: make([]uint32, 2*leaves)}
}

// set makes leaf s hold n and climbs while a parent's maximum changes.
func (x *byAddr) set(s int32, n uint32) {
	j := x.leaves + int(s)
	x.t[j] = n
	for j > 1 {
		m := max(x.t[j], x.t[j^1])
		j >>= 1
		if x.t[j] == m {
			return
		}
		x.t[j] = m
	}
}

// find returns the first page of the lowest-addressed free run of at least
// n pages, or none.
func (x *byAddr) find(n int) int32 {
	if int(x.t[1]) < n {
		return none
	}
	j := 1
	for j < x.leaves {
		j <<= 1
		if int(x.t[j]) < n {
			j++
		}
	}
	return int32(j - x.leaves)
}

// largest returns the length of the longest free run.
func (x *byAddr) largest() int { return int(x.t[1]) }
