package conformance

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/locus-go/locus/pool"
)

// mkHandle builds an arbitrary handle through the public encoding. Transport
// cases use it to send handles of every shape; pool cases use it to forge
// out-of-range and wrong-generation handles.
func mkHandle(poolID, idx uint32, gen uint64) pool.Handle {
	var b [pool.HandleSize]byte
	binary.LittleEndian.PutUint64(b[:], gen)
	binary.LittleEndian.PutUint32(b[8:], idx)
	binary.LittleEndian.PutUint32(b[12:], poolID)
	var h pool.Handle
	_ = h.UnmarshalBinary(b[:]) // cannot fail: b has the right length
	return h
}

// forge forges a handle near the live one (id, idx, gen) of an allocator of
// n blocks (or pages), as forgery kind k: a generation a little off, one
// bit flipped or any (0-2, 6), an index inside, just past or far past the
// n there are (3, 4), a bit of the id flipped (5), or, for any other k, a
// small index and generation. It returns the fields and the error the
// forgery must be refused with, unless it is a live handle.
func forge(rng *rand.Rand, k int, id, idx uint32, gen uint64, n int) (uint32, uint32, uint64, error) {
	pid := id
	switch k {
	case 0:
		gen += uint64(1 + rng.IntN(4))
	case 1:
		gen -= uint64(1 + rng.IntN(4))
	case 2:
		gen ^= 1 << rng.IntN(64)
	case 3:
		idx = uint32(rng.IntN(n + 8))
	case 4:
		idx = uint32(n) + rng.Uint32N(1<<20)
	case 5:
		pid ^= 1 << rng.IntN(32)
	case 6:
		gen = rng.Uint64()
	default:
		idx, gen = uint32(rng.IntN(n)), uint64(rng.IntN(8))
	}
	return pid, idx, gen, refusal(id, pid, idx, gen, n)
}

// refusal is the error a handle (pid, idx, gen) that is no live handle of
// the allocator id of n blocks (or pages) must be refused with.
func refusal(id, pid, idx uint32, gen uint64, n int) error {
	switch {
	case pid == 0 && idx == 0 && gen == 0:
		return pool.ErrZeroHandle
	case pid != id:
		return pool.ErrForeignHandle
	case int(idx) >= n:
		return pool.ErrOutOfRange
	}
	return pool.ErrStaleHandle
}

// poolID returns the pool id a handle carries.
func poolID(h pool.Handle) uint32 {
	b, _ := h.MarshalBinary()
	return binary.LittleEndian.Uint32(b[12:])
}

// specialHandles are values a transport might mangle: the zero handle, every
// field at its extremes, and bit patterns that survive only if every bit of
// every field is carried.
var specialHandles = []pool.Handle{
	{},
	mkHandle(math.MaxUint32, math.MaxUint32, math.MaxUint64),
	mkHandle(0, 0, 1),
	mkHandle(1, 0, 0),
	mkHandle(0, 1, 0),
	mkHandle(0x80000000, 0x80000000, 1<<63),
	mkHandle(0x01020304, 0x05060708, 0x090a0b0c0d0e0f10),
	mkHandle(0xfefdfcfb, 0xfaf9f8f7, 0xf6f5f4f3f2f1f0ef),
	mkHandle(0, 0, math.MaxUint64),
	mkHandle(math.MaxUint32, 0, 0),
	mkHandle(0, math.MaxUint32, 0),
}

// handleSource makes random handles that are unique across producers: each
// value is handed to one producer only, which may then repeat it.
type handleSource struct {
	rng   *rand.Rand
	owner map[pool.Handle]int
}

func newHandleSource(seed uint64) *handleSource {
	return &handleSource{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), owner: map[pool.Handle]int{}}
}

// fresh returns a random handle no producer has been given, now producer p's.
// Each field has a random number of significant bits, so that handles of
// every shape come (small pool ids with large indexes, small generations,
// ...): a transport that packs handles where a field looks small is caught.
func (s *handleSource) fresh(p int) pool.Handle {
	for {
		h := mkHandle(uint32(s.bits(32)), uint32(s.bits(32)), s.bits(64))
		if _, taken := s.owner[h]; !taken {
			s.owner[h] = p
			return h
		}
	}
}

// bits returns a random value of a random number of significant bits, up
// to width; full-width values half the time.
func (s *handleSource) bits(width int) uint64 {
	v := s.rng.Uint64()
	if s.rng.IntN(2) == 0 {
		v >>= 64 - 1 - s.rng.IntN(width)
	} else {
		v >>= 64 - width
	}
	return v
}

// claim gives h to producer p if nobody has it yet and reports whether p
// may send it.
func (s *handleSource) claim(p int, h pool.Handle) bool {
	q, taken := s.owner[h]
	if !taken {
		s.owner[h] = p
		return true
	}
	return q == p
}

// chunk returns n handles for producer p: mostly fresh, with repeats of
// the previous handle, of earlier handles in the chunk, and now and then a
// chunk of one handle repeated, so that a transport that drops or merges
// repeats is caught.
func (s *handleSource) chunk(p, n int, prev pool.Handle) []pool.Handle {
	hs := make([]pool.Handle, n)
	same := n > 2 && s.rng.IntN(16) == 0
	for i := range hs {
		switch r := s.rng.IntN(32); {
		case i == 0 && !prev.IsZero() && r < 2:
			hs[i] = prev // the last handle of the previous chunk again
		case i > 0 && (same || r < 2):
			hs[i] = hs[i-1]
		case i > 2 && r < 3:
			hs[i] = hs[s.rng.IntN(i)]
		default:
			hs[i] = s.fresh(p)
		}
	}
	return hs
}
