// Package blockhdr is the header every stored tier block starts with, on
// disk and in a remote store alike: what block it is, which write made it,
// how long its payload is and the checksums that prove header and payload
// intact, so that a torn, stale, foreign or corrupt block is never served.
package blockhdr

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/locus-go/locus/tier"
)

// The header, little-endian:
//
//	off size field
//	  0    4 magic (one per medium)
//	  4    2 version (1)
//	  6    2 flags (0)
//	  8    8 writer: who wrote it (0 where the medium has one writer)
//	 16    8 write generation (> 0)
//	 24   32 key hash
//	 56    4 key group
//	 60    4 payload length
//	 64    4 payload CRC-32C
//	 68    4 header CRC-32C of bytes 0..67
//
// The payload follows at offset Size.
const (
	Size    = 72
	version = 1
)

// castagnoli is CRC-32C, computed with the SSE4.2 / ARMv8 CRC instructions
// where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrEmpty is Parse's error for an all-zero header (a slot never written);
// it wraps tier.ErrCorrupt.
var ErrEmpty = fmt.Errorf("%w: empty slot", tier.ErrCorrupt)

// Header is one block's header, parsed.
type Header struct {
	Writer uint64
	Gen    uint64
	Key    tier.Key
	Length uint32
	Sum    uint32 // payload CRC-32C
}

// Checksum is the payload checksum a Header carries.
func Checksum(payload []byte) uint32 { return crc32.Checksum(payload, castagnoli) }

// Put encodes h with magic into b, which must hold Size bytes.
func (h *Header) Put(b []byte, magic [4]byte) {
	_ = b[Size-1]
	copy(b[0:4], magic[:])
	binary.LittleEndian.PutUint16(b[4:], version)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], h.Writer)
	binary.LittleEndian.PutUint64(b[16:], h.Gen)
	copy(b[24:56], h.Key.Hash[:])
	binary.LittleEndian.PutUint32(b[56:], h.Key.Group)
	binary.LittleEndian.PutUint32(b[60:], h.Length)
	binary.LittleEndian.PutUint32(b[64:], h.Sum)
	binary.LittleEndian.PutUint32(b[68:], crc32.Checksum(b[:68], castagnoli))
}

// Parse decodes and validates the header at the start of b: its length,
// magic, checksum, version and a generation above 0. It never panics: b of
// any length and content gives a header or an error wrapping
// tier.ErrCorrupt (ErrEmpty for an all-zero header). The payload is the
// caller's to check against Length and Sum.
func Parse(b []byte, magic [4]byte) (Header, error) {
	if len(b) < Size {
		return Header{}, fmt.Errorf("%w: header of %d bytes", tier.ErrCorrupt, len(b))
	}
	b = b[:Size]
	if AllZero(b) {
		return Header{}, ErrEmpty
	}
	if [4]byte(b[0:4]) != magic {
		return Header{}, fmt.Errorf("%w: bad magic %q", tier.ErrCorrupt, b[0:4])
	}
	if got, want := crc32.Checksum(b[:68], castagnoli), binary.LittleEndian.Uint32(b[68:]); got != want {
		return Header{}, fmt.Errorf("%w: header checksum %08x, want %08x", tier.ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != version || binary.LittleEndian.Uint16(b[6:]) != 0 {
		return Header{}, fmt.Errorf("%w: header version %d", tier.ErrCorrupt, v)
	}
	h := Header{
		Writer: binary.LittleEndian.Uint64(b[8:]),
		Gen:    binary.LittleEndian.Uint64(b[16:]),
		Length: binary.LittleEndian.Uint32(b[60:]),
		Sum:    binary.LittleEndian.Uint32(b[64:]),
	}
	copy(h.Key.Hash[:], b[24:56])
	h.Key.Group = binary.LittleEndian.Uint32(b[56:])
	if h.Gen == 0 {
		return Header{}, fmt.Errorf("%w: generation 0", tier.ErrCorrupt)
	}
	return h, nil
}

// AllZero reports whether every byte of b is 0: an empty header, or a
// superblock never written.
func AllZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
