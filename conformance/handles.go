package conformance

import (
	"encoding/binary"

	"github.com/locus-go/locus/pool"
)

// mkHandle builds an arbitrary handle through the public encoding. Transport
// cases use it to tag handles with (producer, sequence); pool cases use it to
// forge out-of-range and even-generation handles.
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
