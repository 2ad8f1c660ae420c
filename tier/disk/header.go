package disk

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/locus-go/locus/tier"
)

// The slot header, at the start of every slot, little-endian:
//
//	off size field
//	  0    4 magic "LKVS"
//	  4    2 version (1)
//	  6    2 flags (0)
//	  8    8 write generation (> 0)
//	 16   32 key hash
//	 48    4 key group
//	 52    4 payload length (the tier's block size)
//	 56    4 payload CRC-32C
//	 60    4 header CRC-32C of bytes 0..59
//
// The payload follows at offset HeaderSize. A slot whose first HeaderSize
// bytes are all zero is empty.
const (
	HeaderSize    = 64
	headerVersion = 1
)

var slotMagic = [4]byte{'L', 'K', 'V', 'S'}

// castagnoli is CRC-32C, computed with the SSE4.2 / ARMv8 CRC instructions
// where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is one slot's header, parsed.
type header struct {
	gen    uint64
	key    tier.Key
	length uint32
	sum    uint32 // payload CRC-32C
}

// put encodes h into b (HeaderSize bytes).
func (h *header) put(b []byte) {
	_ = b[HeaderSize-1]
	copy(b[0:4], slotMagic[:])
	binary.LittleEndian.PutUint16(b[4:], headerVersion)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint64(b[8:], h.gen)
	copy(b[16:48], h.key.Hash[:])
	binary.LittleEndian.PutUint32(b[48:], h.key.Group)
	binary.LittleEndian.PutUint32(b[52:], h.length)
	binary.LittleEndian.PutUint32(b[56:], h.sum)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
}

// errEmpty is parseHeader's answer for an all-zero header.
var errEmpty = fmt.Errorf("%w: empty slot", tier.ErrCorrupt)

// parseHeader decodes and validates a slot header. It never panics: b of
// any length and content gives a header or an error wrapping
// tier.ErrCorrupt (errEmpty for an all-zero header).
func parseHeader(b []byte) (header, error) {
	if len(b) < HeaderSize {
		return header{}, fmt.Errorf("%w: header of %d bytes", tier.ErrCorrupt, len(b))
	}
	b = b[:HeaderSize]
	zero := true
	for _, c := range b {
		if c != 0 {
			zero = false
			break
		}
	}
	if zero {
		return header{}, errEmpty
	}
	if [4]byte(b[0:4]) != slotMagic {
		return header{}, fmt.Errorf("%w: bad magic %q", tier.ErrCorrupt, b[0:4])
	}
	if got, want := crc32.Checksum(b[:60], castagnoli), binary.LittleEndian.Uint32(b[60:]); got != want {
		return header{}, fmt.Errorf("%w: header checksum %08x, want %08x", tier.ErrCorrupt, got, want)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != headerVersion || binary.LittleEndian.Uint16(b[6:]) != 0 {
		return header{}, fmt.Errorf("%w: header version %d", tier.ErrCorrupt, v)
	}
	h := header{gen: binary.LittleEndian.Uint64(b[8:]), length: binary.LittleEndian.Uint32(b[52:]), sum: binary.LittleEndian.Uint32(b[56:])}
	copy(h.key.Hash[:], b[16:48])
	h.key.Group = binary.LittleEndian.Uint32(b[48:])
	if h.gen == 0 {
		return header{}, fmt.Errorf("%w: generation 0", tier.ErrCorrupt)
	}
	return h, nil
}

// The superblock, the file's first superSize bytes, little-endian:
//
//	off size field
//	  0    8 magic "LOCUSTR1"
//	  8    4 block size
//	 12    4 slots
//	 16    4 slot size
//	 20    4 reserved (0)
//	 24    8 floor: slots written below this generation are stale
//	 32    4 CRC-32C of bytes 0..31
const superSize = 4096

var superMagic = [8]byte{'L', 'O', 'C', 'U', 'S', 'T', 'R', '1'}

type super struct {
	blockSize, slots, slotSize uint32
	floor                      uint64
}

func (s *super) put(b []byte) {
	_ = b[35]
	copy(b[0:8], superMagic[:])
	binary.LittleEndian.PutUint32(b[8:], s.blockSize)
	binary.LittleEndian.PutUint32(b[12:], s.slots)
	binary.LittleEndian.PutUint32(b[16:], s.slotSize)
	binary.LittleEndian.PutUint32(b[20:], 0)
	binary.LittleEndian.PutUint64(b[24:], s.floor)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
}

func parseSuper(b []byte) (super, error) {
	if len(b) < 36 || [8]byte(b[0:8]) != superMagic {
		return super{}, fmt.Errorf("%w: not a locus disk tier", tier.ErrCorrupt)
	}
	if crc32.Checksum(b[:32], castagnoli) != binary.LittleEndian.Uint32(b[32:]) {
		return super{}, fmt.Errorf("%w: superblock checksum", tier.ErrCorrupt)
	}
	return super{
		blockSize: binary.LittleEndian.Uint32(b[8:]), slots: binary.LittleEndian.Uint32(b[12:]),
		slotSize: binary.LittleEndian.Uint32(b[16:]), floor: binary.LittleEndian.Uint64(b[24:]),
	}, nil
}
