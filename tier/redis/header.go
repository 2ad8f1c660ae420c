package redis

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/locus-go/locus/tier"
)

// The value header, at the start of every value, little-endian:
//
//	off size field
//	  0    4 magic "LKVR"
//	  4    2 version (1)
//	  6    2 flags (0)
//	  8    8 writer: a random number per Tier (never 0)
//	 16    8 write generation (> 0)
//	 24   32 key hash
//	 56    4 key group
//	 60    4 payload length (the tier's block size)
//	 64    4 payload CRC-32C
//	 68    4 header CRC-32C of bytes 0..67
//
// The payload follows at offset HeaderSize; the value is exactly
// HeaderSize + length bytes.
const (
	HeaderSize    = 72
	headerVersion = 1
)

var magic = [4]byte{'L', 'K', 'V', 'R'}

// castagnoli is CRC-32C (hardware-accelerated where the CPU has it).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type header struct {
	writer uint64
	gen    uint64
	key    tier.Key
	length uint32
	sum    uint32
}

// put encodes h into b (HeaderSize bytes).
func (h *header) put(b []byte) {
	_ = b[HeaderSize-1]
	copy(b[0:4], magic[:])
	binary.LittleEndian.PutUint16(b[4:], headerVersion)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], h.writer)
	binary.LittleEndian.PutUint64(b[16:], h.gen)
	copy(b[24:56], h.key.Hash[:])
	binary.LittleEndian.PutUint32(b[56:], h.key.Group)
	binary.LittleEndian.PutUint32(b[60:], h.length)
	binary.LittleEndian.PutUint32(b[64:], h.sum)
	binary.LittleEndian.PutUint32(b[68:], crc32.Checksum(b[:68], castagnoli))
}

// parseValue decodes and validates a whole value: its header and its
// payload's length and checksum. It never panics: b of any length and
// content gives the header and payload, or an error wrapping
// tier.ErrCorrupt.
func parseValue(b []byte) (header, []byte, error) {
	if len(b) < HeaderSize {
		return header{}, nil, fmt.Errorf("%w: value of %d bytes", tier.ErrCorrupt, len(b))
	}
	if [4]byte(b[0:4]) != magic {
		return header{}, nil, fmt.Errorf("%w: bad magic %q", tier.ErrCorrupt, b[0:4])
	}
	if got, want := crc32.Checksum(b[:68], castagnoli), binary.LittleEndian.Uint32(b[68:]); got != want {
		return header{}, nil, fmt.Errorf("%w: header checksum %08x, want %08x", tier.ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != headerVersion || binary.LittleEndian.Uint16(b[6:]) != 0 {
		return header{}, nil, fmt.Errorf("%w: header version %d", tier.ErrCorrupt, v)
	}
	h := header{
		writer: binary.LittleEndian.Uint64(b[8:]),
		gen:    binary.LittleEndian.Uint64(b[16:]),
		length: binary.LittleEndian.Uint32(b[60:]),
		sum:    binary.LittleEndian.Uint32(b[64:]),
	}
	copy(h.key.Hash[:], b[24:56])
	h.key.Group = binary.LittleEndian.Uint32(b[56:])
	if h.gen == 0 || h.writer == 0 {
		return header{}, nil, fmt.Errorf("%w: generation or writer 0", tier.ErrCorrupt)
	}
	payload := b[HeaderSize:]
	if uint64(len(payload)) != uint64(h.length) {
		return header{}, nil, fmt.Errorf("%w: payload of %d bytes, header says %d (torn)", tier.ErrCorrupt, len(payload), h.length)
	}
	if got := crc32.Checksum(payload, castagnoli); got != h.sum {
		return header{}, nil, fmt.Errorf("%w: payload checksum %08x, want %08x", tier.ErrCorrupt, got, h.sum)
	}
	return h, payload, nil
}
