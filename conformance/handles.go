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
