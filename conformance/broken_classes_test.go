package conformance

import (
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
)

// Deliberately broken size-class allocators: a real classes.Pool behind a
// wrapper with one switchable defect each.

// clsDefect is the one thing a brokenClasses gets wrong.
type clsDefect int

const (
	clsCorrect         clsDefect = iota // none: the wrapper passes every call through
	clsFallback                         // an exhausted class borrows from the next larger one
	clsBoundaryUp                       // n equal to a class's size takes the next class
	clsNoGeneration                     // a stale handle resolves to its block's current handle
	clsIgnoresOwner                     // a handle of another allocator is taken as its own
	clsRequestedWrong                   // Stats reports Requested as the bytes handed out
	clsSenderLoses                      // a sender drops every fifth handle it frees
	clsAllocates                        // every 64th Alloc allocates
	clsOpenAfterClose                   // Close closes nothing
	clsFrozenSnapshot                   // Snapshot returns the first snapshot, forever
	clsSwallowsRejects                  // FreeChunk returns nil when it rejects handles
	clsSharesClasses                    // Classes returns the slice it keeps, so a caller's edit sticks
)

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
}

// tracks reports whether the defect needs the handles handed out.
func (b *brokenCls) tracks() bool { return b.d == clsNoGeneration || b.d == clsIgnoresOwner }

func newBrokenCls(d clsDefect) func() (clsSubject, error) {
	return func() (clsSubject, error) {
		c, err := classes.Default(suiteClasses)
		if err != nil {
			return nil, err
		}
		return &brokenCls{clsSubject: clsAdapter[*classes.Sender]{c}, d: d, cls: c.Classes(),
			live: map[[2]int]classes.Handle{}, ids: map[int]uint32{}}, nil
	}
}

// fix rewrites a handle the way the defect misreads it.
func (b *brokenCls) fix(h classes.Handle) classes.Handle {
	k, blk := h.Class(), h.Block()
	switch b.d {
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
	return h, buf, err
}

func (b *brokenCls) AllocClass(k, n int) (classes.Handle, error) {
	h, err := b.clsSubject.AllocClass(k, n)
	if err == nil {
		b.took(h)
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
	return st
}

func (b *brokenCls) Snapshot() classes.Stats {
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
	return b.clsSubject.Close()
}

func (b *brokenCls) NewSender() (ClassesSender, error) {
	s, err := b.clsSubject.NewSender()
	if err != nil || b.d != clsSenderLoses {
		return s, err
	}
	return &lossySender{ClassesSender: s}, nil
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
			want: catches(ErrContract, "Accounting", "AllocClass", "Close", "DrainOnExhaustion", "ForeignHandle", "ForgedHandle", "NoAliasing", "NoFallback", "SenderRejects", "SenderRetire", "SmallestClass", "StaleHandle"),
		},
		{
			name: "classes: stale handles resolve",
			run:  classesOf(newBrokenCls(clsNoGeneration)),
			want: catches(ErrAccounting, "Accounting", "ForeignHandle", "ForgedHandle", "FreeChunk").and(ErrAliased, "StaleHandle").and(ErrContract, "Snapshot"),
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
			want: catches(ErrAliased, "SmallestClass"),
		},
		{
			name: "classes: FreeChunk hides its rejections",
			run:  classesOf(newBrokenCls(clsSwallowsRejects)),
			want: catches(ErrAliased, "ForeignHandle", "ForgedHandle", "StaleHandle").and(ErrContract, "Close", "FreeChunk"),
		},
	}
}

func TestSuiteRejectsBrokenClasses(t *testing.T) { rejectsBroken(t, brokenClasses()) }

// rejectsBroken checks that each component is rejected by exactly the cases
// it lists, as TestSuiteRejectsBrokenComponents does. The components run one
// after another: each takes a few milliseconds alone, and their allocation
// cases stop the world of every bubble running beside them.
func rejectsBroken(t *testing.T, comps []brokenComponent) {
	for _, c := range comps {
		t.Run(c.name, func(t *testing.T) {
			if race.Enabled && c.onlyWithoutRace != "" {
				t.Skip(c.onlyWithoutRace)
			}
			synctest.Test(t, func(t *testing.T) {
				outs, free := c.run()
				if free != nil {
					free()
				}
				got := found{}
				for _, o := range outs {
					if o.err == nil {
						continue
					}
					if k, ok := c.maybe[o.name]; ok && (k == nil || kindOf(o.err) == k) {
						continue
					}
					got[o.name] = kindOf(o.err)
				}
				want := maps.Clone(c.want)
				if want == nil {
					want = found{}
				}
				if w, ok := underRace[c.name]; ok && race.Enabled {
					want = w
				} else if race.Enabled {
					delete(want, "ZeroAllocs") // skipped: the race runtime allocates
				}
				if !maps.Equal(got, want) {
					var msgs []string
					for _, o := range outs {
						if o.err != nil {
							msgs = append(msgs, o.err.Error())
						}
					}
					t.Errorf("got  %v\nwant %v\n%s", got, want, strings.Join(msgs, "\n"))
				}
			})
		})
	}
}

// underRace are the cases that reject a component under the race detector
// where they differ from its want: the cases run a quarter of their steps
// (see scaled), and ZeroAllocs still fails where the defect shows before
// the allocations are counted.
var underRace = map[string]found{
	"classes: senders lose every fifth handle":              catches(ErrLost, "Accounting", "DrainOnExhaustion", "RemoteExactlyOnce", "SenderRetire", "Snapshot").and(ErrContract, "SenderRejects"),
	"pages: a run after a live one starts on its last page": catches(ErrAliased, "Close", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Instances", "NoOverlap", "Placement", "StaleRun", "ZeroAllocs").and(ErrContract, "Accounting", "Coalescing", "DefaultContent", "Evict", "Exhaustion", "ForgedRun", "Pins", "Snapshot", "Watermarks"),
	"pages: a run of the whole region is refused":           catches(ErrContract, "Coalescing", "DefaultContent", "EvictionMinimal", "Exhaustion", "Instances", "NoOverlap", "Pins", "RunLengths", "Watermarks"),
	"pages: Bytes has spare capacity":                       catches(ErrContract, "Accounting", "Arguments", "Close", "Coalescing", "DefaultContent", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Exhaustion", "ForgedRun", "Instances", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "StaleRun", "Watermarks", "ZeroAllocs"),
	"pages: Evict(n) evicts one run too many":               catches(ErrContract, "Accounting", "Evict", "EvictionLRU"),
	"pages: new runs have no pin":                           catches(ErrContract, "Accounting", "Arguments", "Close", "Coalescing", "DefaultContent", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Exhaustion", "ForgedRun", "Instances", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "StaleRun", "Watermarks", "ZeroAllocs"),
}
