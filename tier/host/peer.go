package host

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
)

// Errors of a Peer's Read, besides pool.ErrClosed and the argument errors
// of tier.CheckSlot. Match them with errors.Is.
var (
	// ErrNoBlock: the row holds no complete block: never written, being
	// written, cleared, or written before the owner's last Reset.
	ErrNoBlock = errors.New("host: row holds no block")
	// ErrChanged: the owner rewrote the row (or reset the tier) while
	// the peer copied it. Nothing the copy wrote to dst may be used; read
	// again, or ask the owner.
	ErrChanged = errors.New("host: row changed during the read")
	// ErrNotShared: Attach found no shared host tier in the file: no
	// valid superblock (the owner has not initialized it yet, or it is
	// another kind of file), or a size that does not match it.
	ErrNotShared = errors.New("host: not a shared host-tier file")
)

// Peer reads the rows of a shared host tier (WithSharedFile) that another
// process, or another Tier in this process, owns: any number of peers may
// read while the owner writes. A peer maps the file read-only and takes no
// lock, so it can neither write a row nor keep the owner out; it has no
// index either (the owner's tier.Manager is the index): it reads the row
// it is told to, and Read returns the key of the block it copied.
//
// The protocol the owner and its peers follow is vLLM's for its worker
// processes: the owner pins the rows with tier.Manager.PrepareLoad, passes
// the plan's slots to the peers (over its own channel), and calls
// CompleteLoad once they have read them; pinned rows are not rewritten.
// A peer that reads outside that protocol (a row the owner is evicting or
// rewriting, during a Reset) is never handed a torn or replaced block:
// Read checks the row's header (key, write generation, checksum) and the
// tier's reset floor before and after its copy, and returns ErrChanged
// unless both are equal and the block is live. The owner writes a row as
// header cleared, payload, header set, each in program order; on the x86
// processors Attach accepts, stores become visible in program order and
// loads are not reordered with each other, so a copy that saw any byte of
// a new write sees the header change after it. Go's compiler keeps the
// header loads on their side of the copy (a memmove call).
//
// The owner never changes the file's size once it is written, and a
// peer relies on that: a file truncated under a peer by something else
// faults its reads (SIGBUS), as it would any mapping of it. Removing the
// file is safe: the peer keeps reading the rows it mapped, which nobody
// writes any more; Attach again to follow a file made anew at the path.
//
// Choose a Peer for a sidecar, a transfer agent or a second engine on the
// same machine reading what the owner's engine offloaded; for readers on
// other machines use tier/redis. A Peer belongs to one goroutine at a
// time; Close it when done.
type Peer struct {
	v    *mmap.View
	meta sharedMeta
	rows []byte // row i at i*bs
	bs   int
	n    int

	afterCopy func() // tests: runs between the copy and the second check
}

// Attach maps the shared host tier at path for reading. The owner must
// have created it (host.New with WithSharedFile) before; it need not be
// running. Attach fails with an error wrapping ErrNotShared when the file
// holds no valid tier, with one wrapping errors.ErrUnsupported off Linux
// or on a processor other than amd64 or 386 (weaker memory orderings need
// fences the owner does not pay for), and with the system's error when the
// file cannot be mapped.
func Attach(path string) (*Peer, error) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		return nil, fmt.Errorf("host: a peer on %s: %w", runtime.GOARCH, errors.ErrUnsupported)
	}
	v, err := mmap.OpenView(path)
	if errors.Is(err, pool.ErrInvalidConfig) { // an empty file
		return nil, fmt.Errorf("%w: %w", ErrNotShared, err)
	}
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	p, err := attach(v)
	if err != nil {
		_ = v.Close()
		return nil, err
	}
	return p, nil
}

// attach checks the view's superblock and size and lays out the rows.
func attach(v *mmap.View) (*Peer, error) {
	b, align := v.Bytes(), v.Align()
	if len(b) < superSize {
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrNotShared, v.Path(), len(b))
	}
	bs, rows, _, empty, err := sharedMeta{b: b}.readSuper()
	switch {
	case empty:
		return nil, fmt.Errorf("%w: %s: no superblock", ErrNotShared, v.Path())
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrNotShared, v.Path(), err)
	case bs <= 0 || rows <= 0 || rows > pool.MaxBlocks:
		return nil, fmt.Errorf("%w: %s: %d rows of %d bytes", ErrNotShared, v.Path(), rows, bs)
	}
	// Every size below is checked against the file's length before it is
	// used, so that no product or sum can wrap (int is 32 bits on 386).
	if rows > (len(b)-superSize)/blockhdr.Size {
		return nil, fmt.Errorf("%w: %s: %d bytes cannot hold the headers of %d rows", ErrNotShared, v.Path(), len(b), rows)
	}
	meta, _ := metaSize(rows) // at most len(b)
	off := meta               // rounded up to align, the first row's page
	if r := meta % align; r != 0 {
		if align-r > len(b)-meta {
			return nil, fmt.Errorf("%w: %s: %d bytes end inside the row headers", ErrNotShared, v.Path(), len(b))
		}
		off += align - r
	}
	if bs > (len(b)-off)/rows {
		return nil, fmt.Errorf("%w: %s: %d bytes cannot hold %d rows of %d bytes", ErrNotShared, v.Path(), len(b), rows, bs)
	}
	return &Peer{v: v, meta: sharedMeta{b: b[:meta:meta]}, rows: b[off : off+rows*bs], bs: bs, n: rows}, nil
}

// BlockSize returns the size of a row; 0 after Close.
func (p *Peer) BlockSize() int {
	if p == nil || p.rows == nil {
		return 0
	}
	return p.bs
}

// Slots returns the number of rows; 0 after Close.
func (p *Peer) Slots() int {
	if p == nil || p.rows == nil {
		return 0
	}
	return p.n
}

// Read copies the block row slot holds into dst (BlockSize bytes) and
// returns its key and write generation. It fails with ErrNoBlock when the
// row holds no complete, live block, with ErrChanged when the row changed
// during the copy (dst then holds nothing usable), with an error of
// tier.CheckSlot for a slot out of range or a dst of the wrong length, and
// with pool.ErrClosed after Close. A caller that was told which key to
// expect compares it with the key returned.
func (p *Peer) Read(slot int, dst []byte) (tier.Key, uint64, error) {
	if p == nil || p.rows == nil {
		return tier.Key{}, 0, pool.ErrClosed
	}
	if err := tier.CheckSlot("host peer", slot, p.n, p.bs, dst); err != nil {
		return tier.Key{}, 0, err
	}
	var before [blockhdr.Size]byte
	copy(before[:], p.meta.hdr(slot))
	h, err := blockhdr.Parse(before[:], rowMagic)
	if err != nil || h.Length != uint32(p.bs) {
		return tier.Key{}, 0, fmt.Errorf("%w: slot %d", ErrNoBlock, slot)
	}
	floor, ok := p.floor()
	if !ok {
		return tier.Key{}, 0, fmt.Errorf("%w: slot %d: the tier is being reset", ErrChanged, slot)
	}
	if h.Gen < floor {
		return tier.Key{}, 0, fmt.Errorf("%w: slot %d: written before a reset", ErrNoBlock, slot)
	}
	copy(dst, p.rows[slot*p.bs:(slot+1)*p.bs])
	if p.afterCopy != nil {
		p.afterCopy()
	}
	if [blockhdr.Size]byte(p.meta.hdr(slot)) != before {
		return tier.Key{}, 0, fmt.Errorf("%w: slot %d", ErrChanged, slot)
	}
	if after, ok := p.floor(); !ok || h.Gen < after {
		return tier.Key{}, 0, fmt.Errorf("%w: slot %d: the tier was reset", ErrChanged, slot)
	}
	return h.Key, h.Gen, nil
}

// floor reads the reset floor from the superblock; false while the owner
// rewrites it.
func (p *Peer) floor() (uint64, bool) {
	var b [superSize]byte
	copy(b[:], p.meta.b[:superSize])
	_, _, floor, empty, err := sharedMeta{b: b[:]}.readSuper()
	return floor, err == nil && !empty
}

// Close unmaps the file. Later calls fail with pool.ErrClosed (Read) or do
// nothing.
func (p *Peer) Close() error {
	if p == nil || p.rows == nil {
		return nil
	}
	p.rows, p.meta = nil, sharedMeta{}
	return p.v.Close()
}
