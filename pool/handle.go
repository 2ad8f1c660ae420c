package pool

import (
	"encoding/binary"
	"fmt"
)

// Handle names one allocation of one block: the pool it came from, the
// block's index and the block's generation at that allocation.
//
// A pool bumps a block's generation when it hands the block out and again when
// the block is freed, so a handle matches its block only between those two
// events. A stale handle (freed, double-freed, or kept after the block was
// reused) and a handle of another pool are rejected by every call with an
// error; they never reach the memory of a live block. Generations are 64 bits
// wide: a block would have to be reused 2^63 times (292 years at one reuse per
// nanosecond) before a generation repeated.
//
// The zero Handle is never valid. Handles are comparable and may be copied
// freely, sent across goroutines and stored.
type Handle struct {
	gen  uint64 // odd while the block is allocated
	idx  uint32
	pool uint32 // the owning pool's id; never 0 for a handle a pool issued
}

// HandleSize is the length of a Handle's binary encoding.
const HandleSize = 16

// Index returns the block index the handle names.
func (h Handle) Index() int { return int(h.idx) }

// Generation returns the block generation the handle was issued with.
func (h Handle) Generation() uint64 { return h.gen }

// IsZero reports whether h is the zero Handle.
func (h Handle) IsZero() bool { return h == Handle{} }

// String formats the handle for debugging, as pool<id>/block<index>@<generation>.
func (h Handle) String() string {
	if h.IsZero() {
		return "pool.Handle{}"
	}
	return fmt.Sprintf("pool%d/block%d@%d", h.pool, h.idx, h.gen)
}

// AppendBinary appends the handle's 16-byte little-endian encoding to b.
func (h Handle) AppendBinary(b []byte) ([]byte, error) {
	b = binary.LittleEndian.AppendUint64(b, h.gen)
	b = binary.LittleEndian.AppendUint32(b, h.idx)
	return binary.LittleEndian.AppendUint32(b, h.pool), nil
}

// MarshalBinary returns the handle's 16-byte encoding, for storing a handle
// outside Go memory (a request table, a log). Decoding gives back an equal
// handle; a pool validates it like any other.
func (h Handle) MarshalBinary() ([]byte, error) {
	return h.AppendBinary(make([]byte, 0, HandleSize))
}

// UnmarshalBinary decodes a handle written by MarshalBinary. It rejects data
// that is not exactly HandleSize bytes with an error wrapping
// ErrInvalidArgument and leaves h unchanged. It does not check that the
// handle is live: a pool does that on use.
func (h *Handle) UnmarshalBinary(data []byte) error {
	if len(data) != HandleSize {
		return fmt.Errorf("%w: handle encoding is %d bytes, want %d", ErrInvalidArgument, len(data), HandleSize)
	}
	h.gen = binary.LittleEndian.Uint64(data)
	h.idx = binary.LittleEndian.Uint32(data[8:])
	h.pool = binary.LittleEndian.Uint32(data[12:])
	return nil
}
