package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
	"github.com/zeebo/xxh3"
)

// A slot (format 2) is the payload, from the slot's first byte (page
// aligned), then, at the next page boundary, a block header
// (tier/internal/blockhdr) whose magic is "LKVS" and whose writer is 0,
// in a page of its own. A slot whose header is all zero is empty. The
// header's Sum is the payload's checksum: the low 32 bits of its XXH3
// (payloadSum), four times cheaper than CRC-32C, which a disk tier reading
// from the page cache spent a third of its time on.
const HeaderSize = blockhdr.Size

// payloadSum is the checksum a slot header keeps of its payload.
func payloadSum(b []byte) uint32 { return uint32(xxh3.Hash(b)) }

// ErrVersion: the file holds a disk tier of another format version (one
// written by an earlier locus, whose header came before the payload). Its
// blocks are a cache: remove the file, and Open makes a fresh one.
var ErrVersion = errors.New("disk: tier file of another format version")

var slotMagic = [4]byte{'L', 'K', 'V', 'S'}

// castagnoli is CRC-32C, for the superblock.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// parseHeader decodes and validates a slot header (see blockhdr.Parse).
func parseHeader(b []byte) (blockhdr.Header, error) { return blockhdr.Parse(b, slotMagic) }

// The superblock, the file's first superSize bytes, little-endian:
//
//	off size field
//	  0    8 magic "LOCUSTR2" (format 2; "LOCUSTR1" was format 1)
//	  8    4 block size
//	 12    4 slots
//	 16    4 slot size
//	 20    4 reserved (0)
//	 24    8 floor: slots written below this generation are stale
//	 32    4 CRC-32C of bytes 0..31
const superSize = 4096

var superMagic = [8]byte{'L', 'O', 'C', 'U', 'S', 'T', 'R', '2'}

// oldMagics are the superblocks of earlier formats: refused with ErrVersion.
var oldMagics = [][8]byte{{'L', 'O', 'C', 'U', 'S', 'T', 'R', '1'}}

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
	if len(b) >= 8 {
		for _, m := range oldMagics {
			if [8]byte(b[0:8]) == m {
				return super{}, fmt.Errorf("%w: format %c, this version reads format %c: remove the file to start afresh", ErrVersion, m[7], superMagic[7])
			}
		}
	}
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
