// Package host is a tier.Storage in host memory: one region of fixed rows,
// one row per block, so that a copy in or out is one memmove (or one DMA).
//
// The region comes from backing/mmap (prefaulted, optionally bound to a
// NUMA node or locked) where the system has it, and from the Go heap
// otherwise or on request (WithHeap: the race detector sees Go-heap
// memory, so tests of copies racing reads run over it). Its blocks live in
// a locus pool; the tier holds them all, and a tier.Manager decides which
// row holds which key. The capacity is exactly what was asked, never
// rounded up: Bytes reports it.
//
// A Registrar, when given, is told of the region after it is mapped and
// before it is unmapped: that is where a GPU backing page-locks host memory
// (cuMemHostRegister) so copies to and from the device run as DMA. Leave it
// nil on CPU-only machines; pinning is a bandwidth optimization, never
// needed for correctness.
//
// Use it as the first tier behind the hot pool:
//
//	st, err := host.New(blockSize, blocks, host.WithPrefault())
//	m, err := tier.New(st)
//
// # Sharing the region
//
// WithSharedFile maps the region from a named file in shared memory
// (/dev/shm, any tmpfs or hugetlbfs mount) instead of anonymous memory:
//
//	st, err := host.New(blockSize, blocks, host.WithSharedFile("/dev/shm/locus-host"), host.WithPrefault())
//
// The tier's index (which row holds which key) lives in the process, in
// the tier.Manager; the file holds the rows and a header per row. The
// file has one owner, the only writer, at a time (an exclusive lock on
// the file, taken by New and released by Close or by the owner's death),
// and New over the same path fails with an error wrapping
// mmap.ErrFileLocked while another tier, in this process or another, has
// it open. What sharing in time buys is recovery, as the disk tier
// has it but at memory speed: the next owner, after the last one closed
// the tier, exited or was killed (SIGKILL included), finds every block
// that was completely written (Recovered, Recovery) and serves it again,
// so an engine restart or upgrade keeps its host tier warm. A block whose
// write was cut short is never served, and blocks written before a Reset
// are not recovered. The file outlives the processes until it is removed
// (os.Remove) or the machine reboots; it holds the rows (exactly
// blockSize × blocks bytes, no rounding: Bytes) after their headers (64
// bytes, then 72 a row, rounded up to a page). Each store writes its
// row's header twice (cleared before the copy, set after it): 144 bytes
// beside the block, no system call.
//
// Readers beside the owner attach with Attach: a Peer maps the file
// read-only, takes no lock, and reads the row it is told to (the owner's
// LoadPlan slots, passed over the engine's own channel, as vLLM passes
// them to its worker processes); it is never handed a torn or replaced
// block, even when it reads a row the owner is rewriting (see Peer). So
// the file is shared in space too: one writer and any number of readers
// on the machine (amd64 and 386). Readers on other machines use
// tier/redis.
package host

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/transport/mailbox"
)

// Registrar page-locks a host region for a device (a GPU backing
// implements it with cuMemHostRegister). Register is called once after the
// region is mapped, Unregister once before it is unmapped.
type Registrar interface {
	Register(addr uintptr, length int) error
	Unregister(addr uintptr, length int) error
}

// Option configures a host tier.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	heap     bool
	mmapOpts []mmap.Option
	reg      Registrar
	nilOpt   bool
	shared   string // WithSharedFile
	isShared bool
}

// WithHeap puts the region on the Go heap instead of a mapping. Choose it
// for tests under the race detector, which does not see mapped memory.
func WithHeap() Option { return optionFunc(func(c *config) { c.heap = true }) }

// WithPrefault faults the whole region in at New (mmap.WithPrefault), so
// no store pays a page fault.
func WithPrefault() Option {
	return optionFunc(func(c *config) { c.mmapOpts = append(c.mmapOpts, mmap.WithPrefault()) })
}

// WithNode binds the region to a NUMA node (mmap.WithNode): the node of
// the GPU or the cores that copy.
func WithNode(node int) Option {
	return optionFunc(func(c *config) { c.mmapOpts = append(c.mmapOpts, mmap.WithNode(node)) })
}

// WithLocked locks the region in memory (mmap.WithLocked).
func WithLocked() Option {
	return optionFunc(func(c *config) { c.mmapOpts = append(c.mmapOpts, mmap.WithLocked()) })
}

// WithRegistrar sets the hook that page-locks the region for a device. It
// needs a mapped region: New fails if the region is on the Go heap.
func WithRegistrar(r Registrar) Option {
	return optionFunc(func(c *config) {
		if r == nil {
			c.nilOpt = true
		}
		c.reg = r
	})
}

// WithSharedFile puts the region in the named file at path, mapped shared
// (mmap.WithFile): a file under /dev/shm, or on any tmpfs or hugetlbfs
// mount, created if it does not exist. Its blocks then outlive the
// process: see "Sharing the region" in the package doc for what that
// means and what it does not. It cannot be combined with WithHeap. Linux
// only: elsewhere New fails with an error wrapping errors.ErrUnsupported.
func WithSharedFile(path string) Option {
	return optionFunc(func(c *config) { c.shared, c.isShared = path, true })
}

type meta struct {
	key   tier.Key
	gen   uint64
	valid bool
}

// Tier is host memory for a tier.Manager: Slots() rows of BlockSize()
// bytes. Build it with New and give it to tier.New, which calls its
// methods as the Storage contract says; after that, only Slot, Mapped and
// Bytes are for the caller.
//
// A row's memory and its metadata are written by one copy worker while
// its slot is store-pending and read by workers while it is load-pinned;
// the Manager's slot states and its mailbox hand-off order the two (see
// package tier), so they need no lock here.
type Tier struct {
	p      *pool.Pool[pool.Backing, *mailbox.Transport, lifo.Policy]
	rows   [][]byte
	meta   []meta
	bs     int
	mapped *mmap.Backing
	reg    Registrar
	floor  atomic.Uint64
	closed bool

	// With WithSharedFile: the file's superblock and row headers (the
	// mapping's meta area), and what New found in them.
	shared   *sharedMeta
	rec      []tier.Recovered
	recovery Recovery
	nextGen  uint64
}

var _ tier.DirectStorage = (*Tier)(nil)

// New builds a host tier of blocks rows of blockSize bytes. It fails with
// an error wrapping pool.ErrInvalidConfig for a non-positive size or count,
// a region the process cannot hold, a nil option or registrar, or a
// registrar over heap memory; with the mapping's or the registrar's error
// otherwise. Where mapping is unsupported (not Linux) it uses the Go heap.
func New(blockSize, blocks int, opts ...Option) (*Tier, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: host: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if cfg.nilOpt {
		return nil, fmt.Errorf("%w: host: nil registrar", pool.ErrInvalidConfig)
	}
	if cfg.isShared {
		if cfg.heap {
			return nil, fmt.Errorf("%w: host: WithSharedFile cannot be combined with WithHeap", pool.ErrInvalidConfig)
		}
		meta, fits := metaSize(blocks)
		if blocks > 0 && blocks <= pool.MaxBlocks && !fits {
			return nil, fmt.Errorf("%w: host: a shared file of %d rows: their headers do not fit in memory", pool.ErrInvalidConfig, blocks)
		}
		if blocks > 0 && blocks <= pool.MaxBlocks {
			cfg.mmapOpts = append(cfg.mmapOpts, mmap.WithFile(cfg.shared), mmap.WithMeta(meta))
		}
	}
	if blockSize <= 0 || blocks <= 0 || blocks > pool.MaxBlocks {
		return nil, fmt.Errorf("%w: host tier of %d blocks of %d bytes", pool.ErrInvalidConfig, blocks, blockSize)
	}
	t := &Tier{bs: blockSize, meta: make([]meta, blocks), reg: cfg.reg, nextGen: 1}
	var b pool.Backing
	if !cfg.heap {
		mb, err := mmap.New(blockSize, blocks, cfg.mmapOpts...)
		switch {
		case err == nil:
			b, t.mapped = mb, mb
		case errors.Is(err, errors.ErrUnsupported) && cfg.reg == nil && !cfg.isShared:
			cfg.heap = true
		default:
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	if cfg.heap {
		if cfg.reg != nil {
			return nil, fmt.Errorf("%w: host: a registrar needs a mapped region, not the Go heap", pool.ErrInvalidConfig)
		}
		hb, err := heap.New(blockSize, blocks)
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		b = hb
	}
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("host: %w", err)
	}
	t.p = p
	hs := make([]pool.Handle, blocks)
	if err := p.AllocChunk(hs); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("host: %w", err)
	}
	t.rows = make([][]byte, blocks)
	for _, h := range hs {
		// Row i is the backing's block i, whatever order the pool
		// hands the blocks out in: a shared file's rows must be where
		// the next process looks for them.
		if t.rows[h.Index()], err = p.Bytes(h); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	if cfg.isShared {
		if err := t.openShared(); err != nil {
			_ = p.Close()
			return nil, err
		}
	}
	if t.reg != nil {
		addr, n := t.mapped.Span()
		if err := t.reg.Register(addr, n); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("host: register: %w", err)
		}
	}
	return t, nil
}

// Medium returns tier.MediumCPU.
func (t *Tier) Medium() tier.Medium { return tier.MediumCPU }

// BlockSize returns the size of a row.
func (t *Tier) BlockSize() int {
	if t == nil {
		return 0
	}
	return t.bs
}

// Slots returns the number of rows.
func (t *Tier) Slots() int {
	if t == nil {
		return 0
	}
	return len(t.rows)
}

// Bytes returns the capacity in bytes: exactly BlockSize × Slots.
func (t *Tier) Bytes() int64 {
	if t == nil {
		return 0
	}
	return int64(t.bs) * int64(len(t.rows))
}

// Mapped reports whether the region is a mapping (false: the Go heap).
func (t *Tier) Mapped() bool { return t != nil && t.mapped != nil }

// Slot returns row i's memory, for an engine that copies itself (a DMA
// into the slots of a tier.Manager's PrepareStore plan, then
// CompleteStore; or out of a PrepareLoad plan's); nil for an i out of
// range or after Close. The Manager's slot states say when a row may be
// written or read, and it keeps the row's record right around such a
// write (Tier is a tier.DirectStorage): PrepareStore invalidates the row,
// so that neither a Peer nor a restart takes it for its old block while
// the engine writes it, and CompleteStore commits it.
func (t *Tier) Slot(i int) []byte {
	if t == nil || t.closed || i < 0 || i >= len(t.rows) {
		return nil
	}
	return t.rows[i]
}

func (t *Tier) check(slot int, b []byte) error {
	switch {
	case t == nil || t.rows == nil || t.closed:
		return pool.ErrClosed
	}
	return tier.CheckSlot("host", slot, len(t.rows), t.bs, b)
}

// WriteSlot copies src into row slot (one memmove) and records its key and
// generation.
func (t *Tier) WriteSlot(slot int, k tier.Key, gen uint64, src []byte) error {
	if err := t.check(slot, src); err != nil {
		return err
	}
	t.meta[slot].valid = false
	if t.shared != nil {
		t.shared.clear(slot) // before the payload: a write cut short leaves an empty row
	}
	copy(t.rows[slot], src)
	if t.shared != nil {
		t.shared.put(slot, k, gen, t.bs) // after it
	}
	t.meta[slot] = meta{key: k, gen: gen, valid: true}
	return nil
}

// Invalidate records that row slot holds no block (in a shared file too:
// its header is cleared), before an engine writes the row itself.
func (t *Tier) Invalidate(slot int) error {
	if err := t.check(slot, t.Slot(slot)); err != nil {
		return err
	}
	t.meta[slot].valid = false
	if t.shared != nil {
		t.shared.clear(slot)
	}
	return nil
}

// Commit records that row slot holds the block of k written with
// generation gen (in a shared file too: its header is set), after an
// engine wrote the row itself.
func (t *Tier) Commit(slot int, k tier.Key, gen uint64) error {
	if err := t.check(slot, t.Slot(slot)); err != nil {
		return err
	}
	if t.shared != nil {
		t.shared.put(slot, k, gen, t.bs)
	}
	t.meta[slot] = meta{key: k, gen: gen, valid: true}
	return nil
}

// ReadSlot copies row slot into dst if it holds the block of k written
// with generation gen; otherwise it fails with tier.ErrCorrupt.
func (t *Tier) ReadSlot(slot int, k tier.Key, gen uint64, dst []byte) error {
	if err := t.check(slot, dst); err != nil {
		return err
	}
	if m := t.meta[slot]; !m.valid || m.key != k || m.gen != gen || gen < t.floor.Load() {
		return fmt.Errorf("%w: host: slot %d holds %v@%d, not %v@%d", tier.ErrCorrupt, slot, m.key, m.gen, k, gen)
	}
	copy(dst, t.rows[slot])
	return nil
}

// Recovered returns the blocks New found in a shared file (nothing
// otherwise: private host memory does not outlive the process) and the
// next write generation.
func (t *Tier) Recovered() ([]tier.Recovered, uint64) {
	if t == nil {
		return nil, 1
	}
	return append([]tier.Recovered(nil), t.rec...), t.nextGen
}

// Recovery returns what New found in a shared file; zero otherwise.
func (t *Tier) Recovery() Recovery {
	if t == nil {
		return Recovery{}
	}
	return t.recovery
}

// SharedFile returns the file of WithSharedFile, or "".
func (t *Tier) SharedFile() string {
	if t == nil || t.mapped == nil {
		return ""
	}
	return t.mapped.Path()
}

// Reset makes every block written below floor unreadable (in a shared
// file too: the floor is kept there).
func (t *Tier) Reset(floor uint64) error {
	if t == nil || t.rows == nil || (t.closed && t.shared != nil) {
		return pool.ErrClosed
	}
	t.floor.Store(floor)
	if t.shared != nil {
		t.shared.setFloor(floor)
	}
	return nil
}

// Close unregisters and releases the region. Later calls do nothing.
func (t *Tier) Close() error {
	if t == nil || t.closed || t.p == nil {
		return nil
	}
	t.closed = true
	var err error
	if t.reg != nil {
		addr, n := t.mapped.Span()
		err = t.reg.Unregister(addr, n)
	}
	return errors.Join(err, t.p.Close())
}
