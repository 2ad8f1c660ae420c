// Package disk is a tier.Storage in one preallocated local file of fixed,
// page-aligned slots, read and written with pread/pwrite (os.File.ReadAt
// and WriteAt).
//
// Every slot holds the payload, page-aligned, then a header in the next
// page: the block's key, its length, a checksum of the payload (XXH3, low
// 32 bits), the write generation and a CRC-32C of the header itself. A
// block is written payload first, header last (one pwritev where the
// block is whole pages, one preadv to read it back), so a slot
// is never served unless it holds exactly the block asked for, intact: a
// torn write (a crash mid-write), a stale slot (another key, an older
// generation, one written before a Reset) and a corrupt one all fail with
// tier.ErrCorrupt, and the tier.Manager drops them. On Open the index is
// rebuilt from the file: complete, checksummed blocks are served again,
// the others are discarded and counted (Recovery).
//
// Writes are not synced: a block survives the process being killed (the
// kernel's page cache holds it), not a power loss, unless WithSyncWrites.
// Slots are page-aligned and page-sized multiples, payload first: the
// layout O_DIRECT needs. I/O is buffered (through the page cache) unless
// WithDirectIO asks for O_DIRECT. On Linux a new file is preallocated
// with fallocate(2) (a sparse file where the file system cannot). Files
// of the earlier format (header before payload) are refused with
// ErrVersion.
//
// Use it as the tier behind the host tier: blocks too many for host memory
// and worth more than recomputing them (disk tiers in the field admit only
// blocks looked up twice: tier.Admission.MinLookups = 2).
package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
)

// pageSize aligns slots: the logical block size O_DIRECT asks for on every
// common file system.
const pageSize = 4096

// maxBlockSize bounds a block: 1 GiB.
const maxBlockSize = 1 << 30

// Option configures a disk tier.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	sync   bool
	direct bool
}

// WithSyncWrites syncs the file (fdatasync) after every block written, so
// blocks survive a power loss, at the cost of a device flush per block.
func WithSyncWrites() Option { return optionFunc(func(c *config) { c.sync = true }) }

// WithDirectIO opens the file with O_DIRECT, so blocks move between the
// device and the caller's buffers with no copy through the page cache:
// the tier's reads then measure the device, not memory, and its writes
// neither evict the engine's other page-cache contents nor pile up dirty
// pages for writeback. Where the file system refuses O_DIRECT at open
// (EINVAL: tmpfs before Linux 6.6, some FUSE and network file systems)
// and on systems other than Linux, Open falls back to buffered I/O:
// DirectIO reports which mode is in use.
//
// Direct I/O needs page-aligned buffers, offsets and lengths. A block of
// whole pages whose buffer starts at a page boundary (a pool block from
// backing/mmap, or any Go allocation of several pages) moves in one
// preadv/pwritev with its header page, with no copy; any other block is
// copied through a page-aligned bounce buffer from a pool (one more
// memmove, one pread/pwrite of the whole slot).
//
// Choose it when the file is much larger than the memory the page cache
// may take, or when loads must not be served from the page cache (to
// measure the device, or to leave the cache to the engine). Do not choose
// it when the file fits in free memory and is read back soon after being
// written: buffered reads then come from memory, several times faster
// than the device.
func WithDirectIO() Option { return optionFunc(func(c *config) { c.direct = true }) }

// Recovery counts what Open found in the file.
type Recovery struct {
	// Recovered blocks are complete and checksummed: served again.
	Recovered int
	// Discarded slots held a torn or corrupt block (a write cut short by
	// a crash), or a duplicate of a newer block; Stale ones a block
	// written before a Reset. Both are free now.
	Discarded, Stale int
	// Empty slots were never written.
	Empty int
}

// Tier is a file of fixed slots for a tier.Manager. Build it with Open and
// give it to tier.New, which calls its methods as the Storage contract
// says. WriteSlot and ReadSlot may run on several goroutines at once (each
// on its own slot); ReadAt and WriteAt are safe for that.
type Tier struct {
	f        *os.File
	rc       syscall.RawConn // f's descriptor, held open for each preadv/pwritev
	path     string
	bs       int
	slots    int
	slotSize int
	cfg      config
	direct   bool // the file is open with O_DIRECT

	floor    atomic.Uint64
	rec      []tier.Recovered
	recovery Recovery
	nextGen  uint64

	bufs   sync.Pool // *[]byte of HeaderSize bytes (a page-aligned page with O_DIRECT)
	bounce sync.Pool // *[]byte: a page-aligned slot (payload span and header page), with O_DIRECT
	closed atomic.Bool
	// writeChunk splits a payload write into pwrites of this many bytes
	// (0: one pwrite): the crash test uses it to make torn writes likely.
	writeChunk int
	chunkPause time.Duration // and pauses this long between them
}

var _ tier.Storage = (*Tier)(nil)

// SlotSize returns the bytes a slot of a blockSize-byte block takes: the
// block rounded up to whole pages, and a page for its header.
func SlotSize(blockSize int) int { return payloadSpan(blockSize) + pageSize }

// payloadSpan is the block rounded up to whole pages: where the header
// starts within a slot.
func payloadSpan(blockSize int) int { return (blockSize + pageSize - 1) / pageSize * pageSize }

// Open opens the disk tier in the file at path, creating and preallocating
// it if it does not exist or is empty, and rebuilding the index from it
// otherwise (see Recovery). It fails with an error wrapping
// pool.ErrInvalidConfig for a non-positive or too large size or count, or a
// file that holds a tier of another geometry; with tier.ErrCorrupt for a
// file that is not a disk tier; with the file system's error otherwise.
func Open(path string, blockSize, slots int, opts ...Option) (*Tier, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: disk: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if blockSize <= 0 || blockSize > maxBlockSize || slots <= 0 || slots > pool.MaxBlocks {
		return nil, fmt.Errorf("%w: disk tier of %d slots of %d bytes", pool.ErrInvalidConfig, slots, blockSize)
	}
	ss := SlotSize(blockSize)
	size := int64(superSize) + int64(slots)*int64(ss)
	f, direct, err := openFile(path, cfg.direct)
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	t := &Tier{f: f, rc: rc, path: path, bs: blockSize, slots: slots, slotSize: ss, cfg: cfg, direct: direct, nextGen: 1}
	if direct {
		t.bufs.New = func() any { b := alignedBuf(pageSize); return &b }
		t.bounce.New = func() any { b := alignedBuf(ss); return &b }
	} else {
		t.bufs.New = func() any { b := make([]byte, HeaderSize); return &b }
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("disk: %w", err)
	}
	want := super{blockSize: uint32(blockSize), slots: uint32(slots), slotSize: uint32(ss)}
	if fi.Size() == 0 {
		err = t.create(size, want)
	} else {
		err = t.recover(fi.Size(), size, want)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return t, nil
}

// openFile opens path for the tier, with O_DIRECT if direct and the file
// system takes it (see WithDirectIO), and says whether it did.
func openFile(path string, direct bool) (*os.File, bool, error) {
	const flags = os.O_RDWR | os.O_CREATE
	if direct && oDirect != 0 {
		f, err := sysOpen(path, flags|oDirect, 0o600)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, false, err
		}
	}
	f, err := sysOpen(path, flags, 0o600)
	return f, false, err
}

// OpenFile opens (creating it, mode 0600) the file at path read-write as
// Open opens a tier's file: with O_DIRECT when direct and the system and
// its file system take it, and it says whether it did. It is for I/O
// beside a tier under the tier's conditions, such as measuring the
// device the tier runs on (locus-eval tiers -direct); a tier's own file
// is Open's to open. With O_DIRECT, buffers and offsets must be aligned
// to the file system's block (a page is enough on Linux).
func OpenFile(path string, direct bool) (f *os.File, directIO bool, err error) {
	return openFile(path, direct)
}

// sysOpen is os.OpenFile; tests replace it to refuse O_DIRECT as tmpfs
// once did.
var sysOpen = os.OpenFile

// DirectIO reports whether the file is open with O_DIRECT: true only with
// WithDirectIO, on Linux, on a file system that takes it.
func (t *Tier) DirectIO() bool { return t != nil && t.direct }

// create preallocates a fresh file: the superblock, then zeroed (empty)
// slots (fallocate where the system has it, else a sparse file).
func (t *Tier) create(size int64, s super) error {
	t.recovery = Recovery{Empty: t.slots}
	if err := preallocate(t.f, size); err != nil {
		return fmt.Errorf("disk: preallocate %d bytes: %w", size, err)
	}
	return t.writeSuper(s)
}

func (t *Tier) writeSuper(s super) error {
	b := alignedBuf(superSize) // aligned for O_DIRECT
	s.put(b)
	if _, err := t.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("disk: superblock: %w", err)
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("disk: sync: %w", err)
	}
	return nil
}

// recover checks the superblock and rebuilds the index from every slot.
func (t *Tier) recover(have, size int64, want super) error {
	sb := alignedBuf(superSize)
	if _, err := t.f.ReadAt(sb, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("disk: superblock: %w", err)
	}
	if blockhdr.AllZero(sb) {
		// The superblock is written last when a file is made: a process
		// killed in Open left this one. Make it afresh.
		return t.create(max(have, size), want)
	}
	s, err := parseSuper(sb)
	if err != nil {
		return fmt.Errorf("disk: %s: %w", t.path, err)
	}
	if s.blockSize != want.blockSize || s.slots != want.slots || s.slotSize != want.slotSize {
		return fmt.Errorf("%w: disk: %s holds %d slots of %d bytes, not %d of %d", pool.ErrInvalidConfig, t.path, s.slots, s.blockSize, want.slots, want.blockSize)
	}
	if have < size {
		if err := t.f.Truncate(size); err != nil {
			return fmt.Errorf("disk: %w", err)
		}
	}
	t.floor.Store(s.floor)
	t.nextGen = max(s.floor, 1)
	best := make(map[tier.Key]int) // key -> index in t.rec
	hb := make([]byte, HeaderSize)
	payload := make([]byte, t.bs)
	if t.direct {
		// Whole aligned pages; the checks below read the first bytes.
		hb, payload = alignedBuf(pageSize), alignedBuf(payloadSpan(t.bs))
	}
	for slot := range t.slots {
		off := t.offset(slot)
		if _, err := t.f.ReadAt(hb, off+int64(payloadSpan(t.bs))); err != nil {
			return fmt.Errorf("disk: read slot %d: %w", slot, err)
		}
		h, err := parseHeader(hb)
		switch {
		case errors.Is(err, blockhdr.ErrEmpty):
			t.recovery.Empty++
			continue
		case err != nil || h.Length != uint32(t.bs):
			t.recovery.Discarded++
			continue
		case h.Gen < s.floor:
			t.recovery.Stale++
			continue
		}
		if _, err := t.f.ReadAt(payload, off); err != nil {
			return fmt.Errorf("disk: read slot %d: %w", slot, err)
		}
		if payloadSum(payload[:t.bs]) != h.Sum {
			t.recovery.Discarded++
			continue
		}
		t.nextGen = max(t.nextGen, h.Gen+1)
		r := tier.Recovered{Slot: slot, Key: h.Key, Gen: h.Gen}
		if i, dup := best[h.Key]; dup {
			t.recovery.Discarded++
			if t.rec[i].Gen < h.Gen {
				t.rec[i] = r
			}
			continue
		}
		best[h.Key] = len(t.rec)
		t.rec = append(t.rec, r)
	}
	t.recovery.Recovered = len(t.rec)
	return nil
}

func (t *Tier) offset(slot int) int64 { return superSize + int64(slot)*int64(t.slotSize) }

// errShortRead: the file ended inside a slot.
var errShortRead = errors.New("disk: short read")

// advance drops the first n bytes of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 && n > 0 {
		bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
	}
	return bufs
}

// Medium returns tier.MediumDisk.
func (t *Tier) Medium() tier.Medium { return tier.MediumDisk }

// BlockSize returns the size of a block.
func (t *Tier) BlockSize() int {
	if t == nil {
		return 0
	}
	return t.bs
}

// Slots returns the number of slots.
func (t *Tier) Slots() int {
	if t == nil {
		return 0
	}
	return t.slots
}

// Recovery returns what Open found in the file.
func (t *Tier) Recovery() Recovery {
	if t == nil {
		return Recovery{}
	}
	return t.recovery
}

// Recovered returns the blocks Open found complete, and the next write
// generation: above every generation in the file and the Reset floor.
func (t *Tier) Recovered() ([]tier.Recovered, uint64) {
	if t == nil {
		return nil, 1
	}
	return append([]tier.Recovered(nil), t.rec...), t.nextGen
}

func (t *Tier) check(slot int, b []byte) error {
	switch {
	case t == nil || t.f == nil || t.closed.Load():
		return pool.ErrClosed
	}
	return tier.CheckSlot("disk", slot, t.slots, t.bs, b)
}

// WriteSlot writes the block: payload first, header last, so that a crash
// mid-write leaves a slot whose checksum fails.
func (t *Tier) WriteSlot(slot int, k tier.Key, gen uint64, src []byte) error {
	if err := t.check(slot, src); err != nil {
		return err
	}
	if gen == 0 {
		return fmt.Errorf("%w: disk: write generation 0", pool.ErrInvalidArgument)
	}
	off := t.offset(slot)
	h := blockhdr.Header{Gen: gen, Key: k, Length: uint32(len(src)), Sum: payloadSum(src)}
	if t.direct {
		if err := t.writeDirect(off, h, src); err != nil {
			return fmt.Errorf("disk: write slot %d: %w", slot, err)
		}
		return t.syncIf()
	}
	bp := t.bufs.Get().(*[]byte)
	defer t.bufs.Put(bp)
	h.Put(*bp, slotMagic)
	hoff := off + int64(payloadSpan(t.bs))
	if t.writeChunk == 0 && len(src) == payloadSpan(t.bs) {
		// One pwritev: the payload, then the header right after it.
		if err := writev(t.f, t.rc, [][]byte{src, *bp}, off); err != nil {
			return fmt.Errorf("disk: write slot %d: %w", slot, err)
		}
	} else {
		for p := 0; p < len(src); {
			n := len(src) - p
			if t.writeChunk > 0 {
				n = min(n, t.writeChunk)
			}
			if _, err := t.f.WriteAt(src[p:p+n], off+int64(p)); err != nil {
				return fmt.Errorf("disk: write slot %d: %w", slot, err)
			}
			p += n
			if t.chunkPause > 0 {
				time.Sleep(t.chunkPause)
			}
		}
		if _, err := t.f.WriteAt(*bp, hoff); err != nil {
			return fmt.Errorf("disk: write slot %d: %w", slot, err)
		}
	}
	return t.syncIf()
}

func (t *Tier) syncIf() error {
	if t.cfg.sync {
		if err := t.f.Sync(); err != nil {
			return fmt.Errorf("disk: sync: %w", err)
		}
	}
	return nil
}

// writeDirect writes a slot through O_DIRECT: payload, then header page.
// An aligned block of whole pages goes as it is, with its header page, in
// one pwritev; any other is copied into a bounce slot first.
func (t *Tier) writeDirect(off int64, h blockhdr.Header, src []byte) error {
	span := payloadSpan(t.bs)
	if t.writeChunk == 0 && len(src) == span && aligned(src) {
		bp := t.bufs.Get().(*[]byte)
		defer t.bufs.Put(bp)
		clear(*bp)
		h.Put(*bp, slotMagic)
		return writev(t.f, t.rc, [][]byte{src, *bp}, off)
	}
	bp := t.bounce.Get().(*[]byte)
	defer t.bounce.Put(bp)
	b := *bp
	copy(b, src)
	clear(b[len(src):])
	h.Put(b[span:], slotMagic)
	if t.writeChunk == 0 {
		_, err := t.f.WriteAt(b, off)
		return err
	}
	// The crash test's torn writes: the payload in pieces of whole pages,
	// then the header.
	chunk := (t.writeChunk + pageSize - 1) / pageSize * pageSize
	for p := 0; p < span; p += chunk {
		n := min(chunk, span-p)
		if _, err := t.f.WriteAt(b[p:p+n], off+int64(p)); err != nil {
			return err
		}
		if t.chunkPause > 0 {
			time.Sleep(t.chunkPause)
		}
	}
	_, err := t.f.WriteAt(b[span:], off+int64(span))
	return err
}

// ReadSlot reads the block of k written with generation gen from slot into
// dst, and fails with tier.ErrCorrupt unless the header, the key, the
// generation and the payload checksum all match.
func (t *Tier) ReadSlot(slot int, k tier.Key, gen uint64, dst []byte) error {
	if err := t.check(slot, dst); err != nil {
		return err
	}
	off := t.offset(slot)
	if t.direct && !(len(dst) == payloadSpan(t.bs) && aligned(dst)) {
		// Through a bounce slot: one pread of payload and header.
		bp := t.bounce.Get().(*[]byte)
		defer t.bounce.Put(bp)
		b := *bp
		if _, err := t.f.ReadAt(b, off); err != nil {
			return fmt.Errorf("disk: read slot %d: %w", slot, err)
		}
		if err := t.checkRead(slot, k, gen, b[:len(dst)], b[payloadSpan(t.bs):]); err != nil {
			return err
		}
		copy(dst, b)
		return nil
	}
	bp := t.bufs.Get().(*[]byte)
	defer t.bufs.Put(bp)
	var err error
	if len(dst) == payloadSpan(t.bs) {
		// One preadv: the payload, then its header.
		err = readv(t.f, t.rc, [][]byte{dst, *bp}, off)
	} else if _, err = t.f.ReadAt(*bp, off+int64(payloadSpan(t.bs))); err == nil {
		_, err = t.f.ReadAt(dst, off)
	}
	if err != nil {
		return fmt.Errorf("disk: read slot %d: %w", slot, err)
	}
	return t.checkRead(slot, k, gen, dst, *bp)
}

// checkRead checks a slot's header hb and payload as read.
func (t *Tier) checkRead(slot int, k tier.Key, gen uint64, dst, hb []byte) error {
	h, err := parseHeader(hb)
	switch {
	case err != nil:
		return fmt.Errorf("disk: slot %d: %w", slot, err)
	case h.Key != k || h.Gen != gen || h.Gen < t.floor.Load() || h.Length != uint32(t.bs):
		return fmt.Errorf("%w: disk: slot %d holds %v@%d, not %v@%d", tier.ErrCorrupt, slot, h.Key, h.Gen, k, gen)
	}
	if payloadSum(dst) != h.Sum {
		return fmt.Errorf("%w: disk: slot %d: payload checksum", tier.ErrCorrupt, slot)
	}
	return nil
}

// Reset records floor in the superblock (synced): blocks written below it
// are never read or recovered again.
func (t *Tier) Reset(floor uint64) error {
	if t == nil || t.f == nil || t.closed.Load() {
		return pool.ErrClosed
	}
	t.floor.Store(floor)
	return t.writeSuper(super{blockSize: uint32(t.bs), slots: uint32(t.slots), slotSize: uint32(t.slotSize), floor: floor})
}

// Close closes the file. Later calls do nothing.
func (t *Tier) Close() error {
	if t == nil || t.closed.Swap(true) || t.f == nil {
		return nil
	}
	return t.f.Close()
}
