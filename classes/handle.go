package classes

import (
	"encoding/binary"
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Handle names one allocation: the size class it came from and the block
// of that class's pool. The block handle is generation-checked by the
// class's pool, so a stale or double-freed handle, a handle of another
// allocator (whose pools differ) and a handle whose class was altered to
// another class (the block handle then names another pool) are all
// rejected with an error matching pool.ErrInvalidHandle; a class index this
// allocator does not have is rejected with ErrUnknownClass.
//
// The zero Handle is never valid. Handles are comparable and may be copied,
// stored and sent across goroutines.
type Handle struct {
	block pool.Handle
	class uint32
}

// HandleSize is the length of a Handle's binary encoding: the block
// handle's 16 bytes, then the class index.
const HandleSize = pool.HandleSize + 4

// Class returns the index of the handle's size class (see Pool.Classes).
func (h Handle) Class() int { return int(h.class) }

// Block returns the handle of the block within its class's pool.
func (h Handle) Block() pool.Handle { return h.block }

// IsZero reports whether h is the zero Handle.
func (h Handle) IsZero() bool { return h == Handle{} }

// String formats the handle for debugging, as class<k>/<block handle>.
func (h Handle) String() string {
	if h.IsZero() {
		return "classes.Handle{}"
	}
	return fmt.Sprintf("class%d/%v", h.class, h.block)
}

// AppendBinary appends the handle's HandleSize-byte little-endian encoding
// to b.
func (h Handle) AppendBinary(b []byte) ([]byte, error) {
	b, _ = h.block.AppendBinary(b)
	return binary.LittleEndian.AppendUint32(b, h.class), nil
}

// MarshalBinary returns the handle's encoding, for keeping a handle outside
// Go memory. Decoding gives back an equal handle; the allocator validates
// it like any other.
func (h Handle) MarshalBinary() ([]byte, error) {
	return h.AppendBinary(make([]byte, 0, HandleSize))
}

// UnmarshalBinary decodes a handle written by MarshalBinary. It rejects data
// that is not exactly HandleSize bytes with an error wrapping
// pool.ErrInvalidArgument and leaves h unchanged. It does not check that
// the handle is live: the allocator does that on use.
func (h *Handle) UnmarshalBinary(data []byte) error {
	if len(data) != HandleSize {
		return fmt.Errorf("%w: class handle encoding is %d bytes, want %d", pool.ErrInvalidArgument, len(data), HandleSize)
	}
	var block pool.Handle
	if err := block.UnmarshalBinary(data[:pool.HandleSize]); err != nil {
		return err
	}
	h.block, h.class = block, binary.LittleEndian.Uint32(data[pool.HandleSize:])
	return nil
}
