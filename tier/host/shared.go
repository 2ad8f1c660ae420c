package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
)

// Recovery counts what New found in a shared file (WithSharedFile).
type Recovery struct {
	// Recovered blocks were written completely: served again.
	Recovered int
	// Discarded rows held a torn header or a duplicate of a newer block;
	// Stale ones a block written before a Reset. Both are free now.
	Discarded, Stale int
	// Empty rows were never written, or their write was cut short.
	Empty int
}

// A shared file (WithSharedFile) is the mapping's meta area, then the rows
// (block 0 at the next page boundary). The meta area is a superblock of
// superSize bytes, little-endian:
//
//	off size field
//	  0    8 magic "LOCUSHT1"
//	  8    4 block size
//	 12    4 rows
//	 16    8 floor: rows written below this generation are stale
//	 24    4 CRC-32C of bytes 0..23
//
// then one block header (tier/internal/blockhdr, magic "LKVH", no payload
// checksum) per row. A row is written header cleared, payload, header set,
// in that order in program order: Go's compiler keeps stores to memory
// in program order around the memmove call, and a process killed
// (SIGKILL included) stops between two instructions with every earlier
// store in the shared pages, so a row whose header is set holds its whole
// block, and a write cut short leaves an empty row. The file lives in
// memory (tmpfs), so a power loss takes it whole: no checksum of the
// payload is needed, and none is paid for on the store path.
const superSize = 64

var (
	superMagic = [8]byte{'L', 'O', 'C', 'U', 'S', 'H', 'T', '1'}
	rowMagic   = [4]byte{'L', 'K', 'V', 'H'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// metaSize is the meta area of a file of n rows; false when it does not
// fit in an int (on 32-bit systems, some 30 million rows).
func metaSize(n int) (int, bool) {
	if n < 0 || n > (math.MaxInt-superSize)/blockhdr.Size {
		return 0, false
	}
	return superSize + n*blockhdr.Size, true
}

// sharedMeta is the meta area of a shared file. Row i's header is written
// only by the copy worker that holds row i store-pending (see Tier), the
// superblock only by Reset and New, on the Manager's owner goroutine.
type sharedMeta struct{ b []byte }

func (m sharedMeta) hdr(slot int) []byte {
	off := superSize + slot*blockhdr.Size
	return m.b[off : off+blockhdr.Size : off+blockhdr.Size]
}

func (m sharedMeta) clear(slot int) { clear(m.hdr(slot)) }

func (m sharedMeta) put(slot int, k tier.Key, gen uint64, bs int) {
	var b [blockhdr.Size]byte // encoded off the mapping, then copied in at once
	h := blockhdr.Header{Gen: gen, Key: k, Length: uint32(bs)}
	h.Put(b[:], rowMagic)
	copy(m.hdr(slot), b[:])
}

func (m sharedMeta) putSuper(bs, rows int, floor uint64) {
	var b [superSize]byte
	copy(b[0:8], superMagic[:])
	binary.LittleEndian.PutUint32(b[8:], uint32(bs))
	binary.LittleEndian.PutUint32(b[12:], uint32(rows))
	binary.LittleEndian.PutUint64(b[16:], floor)
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], castagnoli))
	copy(m.b[:superSize], b[:])
}

func (m sharedMeta) setFloor(floor uint64) {
	bs, rows := binary.LittleEndian.Uint32(m.b[8:]), binary.LittleEndian.Uint32(m.b[12:])
	m.putSuper(int(bs), int(rows), floor)
}

// errSuper: the superblock is neither empty nor valid.
var errSuper = errors.New("host: shared file: bad superblock")

// readSuper returns the geometry and floor of the superblock, whether it
// is empty (a fresh file), or errSuper.
func (m sharedMeta) readSuper() (bs, rows int, floor uint64, empty bool, err error) {
	b := m.b[:superSize]
	if blockhdr.AllZero(b) {
		return 0, 0, 0, true, nil
	}
	if [8]byte(b[0:8]) != superMagic || crc32.Checksum(b[:24], castagnoli) != binary.LittleEndian.Uint32(b[24:]) {
		return 0, 0, 0, false, errSuper
	}
	return int(binary.LittleEndian.Uint32(b[8:])), int(binary.LittleEndian.Uint32(b[12:])),
		binary.LittleEndian.Uint64(b[16:]), false, nil
}

// openShared checks the shared file's superblock (writing one into a
// fresh file) and rebuilds the index from the row headers.
func (t *Tier) openShared() error {
	m := sharedMeta{b: t.mapped.Meta()}
	t.shared = &m
	bs, rows, floor, empty, err := m.readSuper()
	switch {
	case empty:
		m.putSuper(t.bs, len(t.rows), 0)
	case err != nil:
		// A superblock torn by a crash in Reset: the rows' generations
		// cannot be trusted against a floor, so drop them all. New
		// writes take generations above every one seen, so that no
		// (key, generation) a reader may still hold is written again.
		var top uint64
		for i := range t.rows {
			if h, err := blockhdr.Parse(m.hdr(i), rowMagic); err == nil {
				top = max(top, h.Gen)
			}
			if !blockhdr.AllZero(m.hdr(i)) {
				t.recovery.Discarded++
				m.clear(i)
			} else {
				t.recovery.Empty++
			}
		}
		t.nextGen = top + 1
		t.floor.Store(t.nextGen)
		m.putSuper(t.bs, len(t.rows), t.nextGen)
		return nil
	case bs != t.bs || rows != len(t.rows):
		return fmt.Errorf("%w: host: %s holds %d rows of %d bytes, not %d of %d",
			pool.ErrInvalidConfig, t.mapped.Path(), rows, bs, len(t.rows), t.bs)
	}
	t.floor.Store(floor)
	t.nextGen = max(floor, 1)
	best := make(map[tier.Key]int) // key -> index in t.rec
	for slot := range t.rows {
		h, err := blockhdr.Parse(m.hdr(slot), rowMagic)
		switch {
		case errors.Is(err, blockhdr.ErrEmpty):
			t.recovery.Empty++
			continue
		case err != nil || h.Length != uint32(t.bs):
			t.recovery.Discarded++
			m.clear(slot)
			continue
		case h.Gen < floor:
			t.recovery.Stale++
			m.clear(slot)
			continue
		}
		t.nextGen = max(t.nextGen, h.Gen+1)
		r := tier.Recovered{Slot: slot, Key: h.Key, Gen: h.Gen}
		if i, dup := best[h.Key]; dup {
			t.recovery.Discarded++
			if t.rec[i].Gen < h.Gen {
				t.meta[t.rec[i].Slot] = meta{}
				m.clear(t.rec[i].Slot)
				t.rec[i] = r
				t.meta[slot] = meta{key: h.Key, gen: h.Gen, valid: true}
			} else {
				m.clear(slot)
			}
			continue
		}
		best[h.Key] = len(t.rec)
		t.rec = append(t.rec, r)
		t.meta[slot] = meta{key: h.Key, gen: h.Gen, valid: true}
	}
	t.recovery.Recovered = len(t.rec)
	return nil
}
