package conformance

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
)

// Deliberately broken size-class allocators: a real classes.Pool behind a
// wrapper with one switchable defect each.

// clsDefect is the one thing a brokenClasses gets wrong.
type clsDefect int

const (
	clsCorrect           clsDefect = iota // none: the wrapper passes every call through
	clsFallback                           // an exhausted class borrows from the next larger one
	clsBoundaryUp                         // n equal to a class's size takes the next class
	clsNoGeneration                       // a stale handle resolves to its block's current handle
	clsIgnoresOwner                       // a handle of another allocator is taken as its own
	clsRequestedWrong                     // Stats reports Requested as the bytes handed out
	clsSenderLoses                        // a sender drops every fifth handle it frees
	clsAllocates                          // every 64th Alloc allocates
	clsOpenAfterClose                     // Close closes nothing
	clsFrozenSnapshot                     // Snapshot returns the first snapshot, forever
	clsSwallowsRejects                    // FreeChunk returns nil when it rejects handles
	clsSharesClasses                      // Classes returns the slice it keeps, so a caller's edit sticks
	clsGen16                              // handles carry generations of 16 bits
	clsRecycledIDs                        // the ids of closed allocators are handed out again
	clsStatsOnlySnapshot                  // Snapshot is refreshed only by Stats and Close, never by Drain
	clsSharedStats                        // Stats returns a slice it keeps and rewrites
	clsSharedSnapshot                     // Snapshot returns a slice it keeps and rewrites
	clsChunkAllocs                        // FreeChunk allocates with more than 4 handles of a class
)

// clsSlots are the slots of closed clsRecycledIDs allocators, for the next
// ones; clsNextSlot numbers new slots.
var clsSlots struct {
	sync.Mutex
	free []uint32
	next uint32
}

// brokenCls wraps a real allocator; its fields are the owner's, but for
// once and first, which Snapshot reads from any goroutine.
type brokenCls struct {
	clsSubject
	d      clsDefect
	live   map[[2]int]classes.Handle // clsNoGeneration: class, index -> live handle
	ids    map[int]uint32            // clsIgnoresOwner: class -> pool id
	allocs int
	sink   [][]byte
	once   sync.Once // clsFrozenSnapshot
	first  classes.Stats
	cls    []classes.Class
	buf    []classes.Handle
	slot   uint32               // clsRecycledIDs
	real   [8]atomic.Uint32     // clsRecycledIDs: each class's pool id, for senders too
	closed bool                 // clsRecycledIDs
	mu     sync.Mutex           // clsStatsOnlySnapshot, clsSharedSnapshot
	last   classes.Stats        // clsStatsOnlySnapshot: the last Stats
	shared []classes.ClassStats // clsSharedStats, clsSharedSnapshot
	counts map[int]int          // clsChunkAllocs
}

// tracks reports whether the defect needs the handles handed out.
func (b *brokenCls) tracks() bool { return b.d == clsNoGeneration || b.d == clsIgnoresOwner }

// maps reports whether the defect rewrites the handles it hands out.
func (b *brokenCls) maps() bool { return b.d == clsGen16 || b.d == clsRecycledIDs }

// virtual is the pool id a clsRecycledIDs allocator puts in the handles
// of class k: its slot's, reused once it is closed.
func (b *brokenCls) virtual(k int) uint32 { return 0x7f000000 | b.slot<<8 | uint32(k) }

// out rewrites a handle handed out the way the defect writes it.
func (b *brokenCls) out(h classes.Handle) classes.Handle {
	k, blk := h.Class(), h.Block()
	switch b.d {
	case clsGen16:
		return mkClassHandle(mkHandle(idOf(blk), uint32(blk.Index()), blk.Generation()&(1<<16-1)), uint32(k))
	case clsRecycledIDs:
		b.real[k].Store(idOf(blk))
		return mkClassHandle(mkHandle(b.virtual(k), uint32(blk.Index()), blk.Generation()), uint32(k))
	}
	return h
}

// idOf is poolID without allocating.
func idOf(h pool.Handle) uint32 {
	var b [pool.HandleSize]byte
	enc, _ := h.AppendBinary(b[:0])
	return uint32(enc[12]) | uint32(enc[13])<<8 | uint32(enc[14])<<16 | uint32(enc[15])<<24
}

// outErr rewrites the first handle of a rejection the way out would.
func (b *brokenCls) outErr(err error) error {
	if b.d != clsRecycledIDs || err == nil {
		return err
	}
	return b.outRejected(err)
}

func (b *brokenCls) outRejected(err error) error {
	var re *pool.RejectedError
	if !errors.As(err, &re) {
		return err
	}
	for k := range b.real {
		if id := b.real[k].Load(); id != 0 && id == poolID(re.First) {
			c := *re
			c.First = mkHandle(b.virtual(k), uint32(re.First.Index()), re.First.Generation())
			return &c
		}
	}
	return err
}

func (b *brokenCls) Drain() (int, error) {
	n, err := b.clsSubject.Drain()
	return n, b.outErr(err)
}

// fromVirtual maps a clsRecycledIDs handle back to its class's pool.
func (b *brokenCls) fromVirtual(h classes.Handle) classes.Handle {
	k, blk := h.Class(), h.Block()
	if k < 0 || k >= len(b.real) || idOf(blk) != b.virtual(k) {
		return h
	}
	if id := b.real[k].Load(); id != 0 {
		return mkClassHandle(mkHandle(id, uint32(blk.Index()), blk.Generation()), uint32(k))
	}
	return h
}

func newBrokenCls(d clsDefect) func() (clsSubject, error) {
	return func() (clsSubject, error) {
		c, err := classes.Default(suiteClasses)
		if err != nil {
			return nil, err
		}
		b := &brokenCls{clsSubject: clsAdapter[*classes.Sender]{c}, d: d, cls: c.Classes(),
			live: map[[2]int]classes.Handle{}, ids: map[int]uint32{}, counts: map[int]int{}}
		if d == clsRecycledIDs {
			clsSlots.Lock()
			if n := len(clsSlots.free); n > 0 {
				b.slot, clsSlots.free = clsSlots.free[n-1], clsSlots.free[:n-1]
			} else {
				clsSlots.next++
				b.slot = clsSlots.next
			}
			clsSlots.Unlock()
		}
		return b, nil
	}
}

// fix rewrites a handle the way the defect misreads it.
func (b *brokenCls) fix(h classes.Handle) classes.Handle {
	k, blk := h.Class(), h.Block()
	switch b.d {
	case clsGen16:
		if cur, ok := b.live[[2]int{k, blk.Index()}]; ok && b.out(cur) == h {
			return cur
		}
	case clsRecycledIDs:
		return b.fromVirtual(h)
	case clsNoGeneration:
		if cur, ok := b.live[[2]int{k, blk.Index()}]; ok && poolID(cur.Block()) == poolID(blk) {
			return cur
		}
	case clsIgnoresOwner:
		if id, ok := b.ids[k]; ok && !blk.IsZero() {
			return mkClassHandle(mkHandle(id, uint32(blk.Index()), blk.Generation()), uint32(k))
		}
	}
	return h
}

// took records a handle handed out.
func (b *brokenCls) took(h classes.Handle) {
	if b.d == clsGen16 {
		b.live[[2]int{h.Class(), h.Block().Index()}] = h
	}
	if !b.tracks() {
		return
	}
	b.live[[2]int{h.Class(), h.Block().Index()}] = h
	b.ids[h.Class()] = poolID(h.Block())
}

func (b *brokenCls) gone(h classes.Handle) {
	if !b.tracks() {
		return
	}
	delete(b.live, [2]int{h.Class(), h.Block().Index()})
}

func (b *brokenCls) Alloc(n int) (classes.Handle, error) {
	h, _, err := b.AllocBytes(n)
	return h, err
}

func (b *brokenCls) AllocBytes(n int) (classes.Handle, []byte, error) {
	b.allocs++
	if b.d == clsAllocates && b.allocs%64 == 0 {
		b.sink = append(b.sink, make([]byte, 64))
	}
	k, kerr := b.ClassOf(n)
	var h classes.Handle
	var err error
	switch {
	case kerr == nil && b.d == clsBoundaryUp && n == b.cls[k].Size && k+1 < len(b.cls):
		h, err = b.AllocClass(k+1, n)
	default:
		h, err = b.clsSubject.Alloc(n)
		if b.d == clsFallback && errors.Is(err, pool.ErrExhausted) && k+1 < len(b.cls) {
			h, err = b.AllocClass(k+1, n)
		}
	}
	if err != nil {
		return h, nil, err
	}
	b.took(h)
	buf, err := b.clsSubject.Bytes(h)
	return b.out(h), buf, err
}

func (b *brokenCls) AllocClass(k, n int) (classes.Handle, error) {
	h, err := b.clsSubject.AllocClass(k, n)
	if err == nil {
		b.took(h)
		h = b.out(h)
	}
	return h, err
}

func (b *brokenCls) Free(h classes.Handle) error {
	h = b.fix(h)
	err := b.clsSubject.Free(h)
	if err == nil {
		b.gone(h)
	}
	return err
}

func (b *brokenCls) FreeChunk(chunk []classes.Handle) error {
	if b.d == clsChunkAllocs {
		clear(b.counts)
		for _, h := range chunk {
			if b.counts[h.Class()]++; b.counts[h.Class()] == 5 {
				b.sink = append(b.sink, make([]byte, 8)) // "a bigger group"
			}
		}
	}
	if b.maps() {
		fixed := b.buf[:0]
		for _, h := range chunk {
			fixed = append(fixed, b.fix(h))
		}
		b.buf = fixed
		return b.outErr(b.clsSubject.FreeChunk(fixed))
	}
	if !b.tracks() {
		err := b.clsSubject.FreeChunk(chunk)
		if b.d == clsSwallowsRejects {
			return nil
		}
		return err
	}
	fixed := b.buf[:0]
	for _, h := range chunk {
		fixed = append(fixed, b.fix(h))
	}
	b.buf = fixed
	err := b.clsSubject.FreeChunk(fixed)
	for _, h := range fixed {
		if _, dead := b.clsSubject.Bytes(h); dead != nil {
			b.gone(h)
		}
	}
	return err
}

func (b *brokenCls) Bytes(h classes.Handle) ([]byte, error) { return b.clsSubject.Bytes(b.fix(h)) }

func (b *brokenCls) Classes() []classes.Class {
	if b.d == clsSharesClasses {
		return b.cls // its own: a caller's edit changes what it reports next
	}
	return b.clsSubject.Classes()
}

func (b *brokenCls) Stats() classes.Stats {
	st := b.clsSubject.Stats()
	if b.d == clsRequestedWrong {
		for k := range st.Classes {
			st.Classes[k].Requested = st.Classes[k].HandedOut()
		}
	}
	switch b.d {
	case clsStatsOnlySnapshot:
		b.mu.Lock()
		b.last = st
		b.last.Classes = slices.Clone(st.Classes)
		b.mu.Unlock()
	case clsSharedStats:
		b.shared = append(b.shared[:0], st.Classes...)
		st.Classes = b.shared
	}
	return st
}

func (b *brokenCls) Snapshot() classes.Stats {
	switch b.d {
	case clsStatsOnlySnapshot:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.last.Classes == nil {
			b.last = b.clsSubject.Snapshot() // the allocator's own publication at New
		}
		st := b.last
		st.Classes = slices.Clone(st.Classes)
		return st
	case clsSharedSnapshot:
		st := b.clsSubject.Snapshot()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.shared = append(b.shared[:0], st.Classes...)
		st.Classes = b.shared
		return st
	}
	if b.d != clsFrozenSnapshot {
		return b.clsSubject.Snapshot()
	}
	b.once.Do(func() { b.first = b.clsSubject.Snapshot() })
	return b.first
}

func (b *brokenCls) Close() error {
	if b.d == clsOpenAfterClose {
		return nil
	}
	if b.d == clsStatsOnlySnapshot && !b.closed {
		b.Stats() // the final publication
	}
	err := b.clsSubject.Close()
	if b.d == clsRecycledIDs && err == nil && !b.closed {
		clsSlots.Lock()
		clsSlots.free = append(clsSlots.free, b.slot)
		clsSlots.Unlock()
	}
	b.closed = b.closed || err == nil
	return err
}

func (b *brokenCls) NewSender() (ClassesSender, error) {
	s, err := b.clsSubject.NewSender()
	if err != nil {
		return s, err
	}
	switch b.d {
	case clsSenderLoses:
		return &lossySender{ClassesSender: s}, nil
	case clsRecycledIDs:
		return &virtualSender{ClassesSender: s, b: b}, nil
	}
	return s, nil
}

// virtualSender maps the handles of a clsRecycledIDs allocator back to
// their pools.
type virtualSender struct {
	ClassesSender
	b   *brokenCls
	buf []classes.Handle
}

func (s *virtualSender) FreeChunk(chunk []classes.Handle) error {
	s.buf = s.buf[:0]
	for _, h := range chunk {
		s.buf = append(s.buf, s.b.fromVirtual(h))
	}
	return s.ClassesSender.FreeChunk(s.buf)
}

func (s *virtualSender) Free(h classes.Handle) error {
	return s.ClassesSender.Free(s.b.fromVirtual(h))
}

// lossySender drops every fifth handle it is given.
type lossySender struct {
	ClassesSender
	n int
}

func (s *lossySender) FreeChunk(chunk []classes.Handle) error {
	kept := make([]classes.Handle, 0, len(chunk))
	for _, h := range chunk {
		if s.n++; s.n%5 != 0 {
			kept = append(kept, h)
		}
	}
	return s.ClassesSender.FreeChunk(kept)
}

func (s *lossySender) Free(h classes.Handle) error {
	return s.FreeChunk([]classes.Handle{h})
}

// sharedClasses returns a constructor of real allocators whose classes of
// one size all hand out the same blocks.
func sharedClasses() func() (clsSubject, error) {
	regions := map[int]*heap.Backing{}
	return realClasses(func(size, n int) (pool.Backing, error) {
		if regions[size] == nil {
			regions[size] = mustHeapBacking(size, n)
		}
		return sharedBacking{regions[size]}, nil
	}, newMailbox, lifo.Policy{})
}

func classesOf(ctor func() (clsSubject, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return classesSuite().run(ctor, "broken_classes_test.go"), nil }
}

// brokenClasses are the size-class allocators the suite must reject.
func brokenClasses() []brokenComponent {
	return []brokenComponent{
		{name: "classes: a correct wrapper", run: classesOf(newBrokenCls(clsCorrect))},
		{
			name: "classes: an exhausted class borrows from the next",
			run:  classesOf(newBrokenCls(clsFallback)),
			want: catches(ErrDuplicated, "NoFallback"),
		},
		{
			name: "classes: a class's own size takes the next class",
			run:  classesOf(newBrokenCls(clsBoundaryUp)),
			want: catches(ErrContract, "Accounting", "AllocClass", "Close", "DrainOnExhaustion", "ForeignHandle", "ForgedHandle", "NoAliasing", "NoFallback", "SenderRejects", "SenderRetire", "SmallestClass", "Snapshot", "StaleHandle", "ZeroAllocs"),
		},
		{
			name: "classes: stale handles resolve",
			run:  classesOf(newBrokenCls(clsNoGeneration)),
			want: catches(ErrAccounting, "Accounting", "ForeignHandle", "ForgedHandle", "FreeChunk").and(ErrDuplicated, "Snapshot").and(ErrAliased, "StaleHandle"),
		},
		{
			name: "classes: another allocator's handles are taken as its own",
			run:  classesOf(newBrokenCls(clsIgnoresOwner)),
			want: catches(ErrAccounting, "Accounting", "FreeChunk", "StaleHandle").and(ErrAliased, "ForeignHandle", "ForgedHandle"),
		},
		{
			name: "classes: Requested counts the bytes handed out",
			run:  classesOf(newBrokenCls(clsRequestedWrong)),
			want: catches(ErrAccounting, "Accounting", "AllocClass", "FreeChunk", "NoAliasing", "SmallestClass", "Snapshot"),
		},
		{
			name: "classes: senders lose every fifth handle",
			run:  classesOf(newBrokenCls(clsSenderLoses)),
			want: catches(ErrLost, "Accounting", "DrainOnExhaustion", "RemoteExactlyOnce", "SenderRetire", "Snapshot", "ZeroAllocs").and(ErrAliased, "StaleHandle").and(ErrContract, "SenderRejects"),
		},
		{
			name: "classes: every 64th Alloc allocates",
			run:  classesOf(newBrokenCls(clsAllocates)),
			want: catches(ErrAllocs, "ZeroAllocs"),
		},
		{
			name: "classes: Close closes nothing",
			run:  classesOf(newBrokenCls(clsOpenAfterClose)),
			want: catches(ErrContract, "Close"),
		},
		{
			name: "classes: Snapshot never changes",
			run:  classesOf(newBrokenCls(clsFrozenSnapshot)),
			want: catches(ErrAccounting, "Snapshot"),
		},
		{
			// pool.New refuses a second open pool over one region, so the
			// cases that open two allocators fail at their constructor.
			name: "classes: allocators over one region per class",
			run:  classesOf(sharedClasses()),
			want: catches(nil, "ForeignHandle", "RemoteExactlyOnce"),
		},
		{
			name: "classes: Classes returns the slice it keeps",
			run:  classesOf(newBrokenCls(clsSharesClasses)),
			want: catches(ErrAliased, "SmallestClass", "Snapshot"),
		},
		{
			name: "classes: generations are kept in 16 bits",
			want: catches(ErrLost, "ZeroAllocs").and(ErrAliased, "StaleHandle"),
			run:  classesOf(newBrokenCls(clsGen16)),
		},
		{
			name: "classes: the ids of closed allocators are reused",
			want: catches(ErrAliased, "ForeignHandle"),
			run:  classesOf(newBrokenCls(clsRecycledIDs)),
		},
		{
			name: "classes: Snapshot is refreshed only by Stats",
			want: catches(ErrAccounting, "Snapshot"),
			run:  classesOf(newBrokenCls(clsStatsOnlySnapshot)),
		},
		{
			name: "classes: Stats returns a slice it rewrites",
			want: catches(ErrAliased, "Snapshot"),
			run:  classesOf(newBrokenCls(clsSharedStats)),
		},
		{
			name:            "classes: Snapshot returns a slice it rewrites",
			want:            catches(ErrAliased, "Snapshot"),
			run:             classesOf(newBrokenCls(clsSharedSnapshot)),
			onlyWithoutRace: "the race detector itself reports the scrapers' reads of the slice the allocator rewrites",
		},
		{
			name: "classes: FreeChunk allocates with more than 4 handles of a class",
			want: catches(ErrAllocs, "ZeroAllocs"),
			run:  classesOf(newBrokenCls(clsChunkAllocs)),
		},
		{
			name: "classes: FreeChunk hides its rejections",
			run:  classesOf(newBrokenCls(clsSwallowsRejects)),
			want: catches(ErrAliased, "ForeignHandle", "ForgedHandle", "StaleHandle").and(ErrContract, "Close", "FreeChunk"),
		},
	}
}

func TestSuiteRejectsBrokenClasses(t *testing.T) { rejectsBroken(t, brokenClasses(), false) }

// underRace are the cases that reject a component under the race detector
// where they differ from its want: the cases run a quarter of their steps
// (see scaled), and ZeroAllocs still fails where the defect shows before
// the allocations are counted.
var underRace = map[string]found{
	"classes: senders lose every fifth handle":              catches(ErrLost, "Accounting", "DrainOnExhaustion", "RemoteExactlyOnce", "SenderRetire", "Snapshot").and(ErrContract, "SenderRejects"),
	"pages: a run after a live one starts on its last page": catches(ErrAliased, "Close", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Instances", "NoOverlap", "Placement", "StaleRun", "Wraparound", "ZeroAllocs").and(ErrContract, "Accounting", "Coalescing", "ContentRange", "DefaultContent", "Evict", "Exhaustion", "ForgedRun", "Pins", "Snapshot", "Watermarks"),
	"pages: a run of the whole region is refused":           catches(ErrContract, "Coalescing", "DefaultContent", "EvictionMinimal", "Exhaustion", "Instances", "NoOverlap", "Pins", "RunLengths", "Watermarks", "Wraparound"),
	"pages: Bytes has spare capacity":                       catches(ErrContract, "Accounting", "Arguments", "Close", "Coalescing", "ContentRange", "DefaultContent", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Exhaustion", "ForgedRun", "Instances", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "StaleRun", "Watermarks", "Wraparound", "ZeroAllocs"),
	"pages: Evict(n) evicts one run too many":               catches(ErrContract, "Accounting", "ContentRange", "Evict", "EvictionLRU"),
	"pages: new runs have no pin":                           catches(ErrContract, "Accounting", "Arguments", "Close", "Coalescing", "ContentRange", "DefaultContent", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Exhaustion", "ForgedRun", "Instances", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "StaleRun", "Watermarks", "Wraparound", "ZeroAllocs"),
}
