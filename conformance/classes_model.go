package conformance

import (
	"errors"
	"fmt"
	"slices"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pool"
)

// clModel is the suite's model of a size-class allocator: model.Sizes,
// with the allocator it drives.
type clModel struct {
	*model.Sizes[classes.Handle]
	c   clsSubject
	cls []classes.Class
	ids []uint32 // each class's pool id, from its first block
	tag byte
}

type clBlock = model.Block[classes.Handle]

func newClModel(c clsSubject) (*clModel, error) {
	cls := slices.Clone(c.Classes()) // the model's own, whatever the allocator does with its
	if len(cls) < classesMin {
		return nil, &ctorError{fmt.Errorf("the size-class suite needs at least %d classes, got %d", classesMin, len(cls))}
	}
	for k, cl := range cls {
		if cl.Blocks < classBlocksMin {
			return nil, &ctorError{fmt.Errorf("the size-class suite needs classes of at least %d blocks; class %d has %d", classBlocksMin, k, cl.Blocks)}
		}
		if cl.Size <= 0 || (k > 0 && cls[k-1].Size >= cl.Size) {
			return nil, violationf(ErrContract, "Classes() = %v: sizes must be positive and distinct, smallest first", cls)
		}
	}
	mcls := make([]model.Class, len(cls))
	for k, cl := range cls {
		mcls[k] = model.Class{Size: cl.Size, Blocks: cl.Blocks}
	}
	m := &clModel{Sizes: model.NewSizes[classes.Handle](mcls), c: c, cls: cls, ids: make([]uint32, len(cls))}
	if err := m.check("a fresh allocator"); err != nil {
		return nil, err
	}
	return m, nil
}

// check compares Stats with the model, class by class.
func (m *clModel) check(what string) error {
	st := m.c.Stats()
	return m.compare(what, st)
}

func (m *clModel) compare(what string, st classes.Stats) error {
	if len(st.Classes) != len(m.cls) {
		return violationf(ErrAccounting, "%s: Stats has %d classes, Classes() %d", what, len(st.Classes), len(m.cls))
	}
	for k, got := range st.Classes {
		if err := identities(got.Stats); err != nil {
			return fmt.Errorf("%s: class %d: %w", what, k, err)
		}
		if got.Requested > got.HandedOut() {
			return violationf(ErrAccounting, "%s: class %d: Requested %d > Allocs × BlockSize %d", what, k, got.Requested, got.HandedOut())
		}
		c, cl := m.Counts[k], m.cls[k]
		w := classes.ClassStats{Requested: c.Requested, Stats: pool.Stats{BlockSize: cl.Size, Capacity: cl.Blocks, Order: got.Order,
			Live: c.Live, Free: c.Free, HighWater: c.HighWater, Allocs: c.Allocs, Frees: c.Frees,
			RemoteSubmitted: c.RemoteSubmitted, RemoteDrained: c.RemoteDrained, Rejected: c.Rejected,
			Drains: got.Drains, DrainSizes: got.DrainSizes}}
		if got != w {
			return violationf(ErrAccounting, "%s: class %d (%d-byte blocks) differs from the model: %s", what, k, m.cls[k].Size, fieldDiff(got, w))
		}
	}
	if st.Rejected != m.Rejected {
		return violationf(ErrAccounting, "%s: Stats.Rejected = %d, want %d handles naming no class", what, st.Rejected, m.Rejected)
	}
	return nil
}

// How an allocation is made.
const (
	viaAlloc = iota
	viaAllocBytes
	viaAllocClass
)

var viaNames = [...]string{"Alloc", "AllocBytes", "AllocClass"}

// alloc allocates n bytes (from class k with viaAllocClass) and checks the
// block; when the model agrees that the class is exhausted it returns nil
// and no error.
func (m *clModel) alloc(n, how, k int) (*clBlock, error) {
	if how != viaAllocClass {
		k = m.ClassFor(n)
	}
	what := fmt.Sprintf("%s(%d)", viaNames[how], n)
	if how == viaAllocClass {
		what = fmt.Sprintf("AllocClass(%d, %d)", k, n)
	}
	var h classes.Handle
	var buf []byte
	var err error
	switch how {
	case viaAlloc:
		h, err = m.c.Alloc(n)
	case viaAllocBytes:
		h, buf, err = m.c.AllocBytes(n)
	default:
		h, err = m.c.AllocClass(k, n)
	}
	w := &m.Counts[k]
	if w.Free == 0 {
		if err == nil {
			return nil, violationf(ErrDuplicated, "%s with every block of class %d live = %v, want pool.ErrExhausted", what, k, h)
		}
		if !errors.Is(err, pool.ErrExhausted) {
			return nil, violationf(ErrContract, "%s with class %d exhausted = %v, want pool.ErrExhausted", what, k, err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, violationf(ErrContract, "%s with %d blocks of class %d free: %v", what, w.Free, k, err)
	}
	if h.Class() != k {
		return nil, violationf(ErrContract, "%s gave a block of class %d (%d bytes); the smallest class that holds it is %d (%d bytes)", what, h.Class(), m.sizeOf(h.Class()), k, m.cls[k].Size)
	}
	idx := h.Block().Index()
	if idx < 0 || idx >= m.cls[k].Blocks {
		return nil, violationf(ErrContract, "%s gave block %d of a class of %d blocks", what, idx, m.cls[k].Blocks)
	}
	if _, dup := m.Live[h]; dup || m.Taken[k][idx] {
		return nil, violationf(ErrDuplicated, "%s gave block %d of class %d, which a live handle holds", what, idx, k)
	}
	id := poolID(h.Block())
	switch {
	case m.ids[k] == 0:
		m.ids[k] = id
	case m.ids[k] != id:
		return nil, violationf(ErrContract, "%s gave a block of pool id %d; class %d's blocks carry %d", what, id, k, m.ids[k])
	}
	mem, err := m.c.Bytes(h)
	if err != nil || len(mem) != m.cls[k].Size || cap(mem) != len(mem) {
		return nil, violationf(ErrContract, "Bytes of the block %s gave: %d bytes, capacity %d, %v; want %d bytes, no spare capacity", what, len(mem), cap(mem), err, m.cls[k].Size)
	}
	if how == viaAllocBytes && (len(buf) != len(mem) || &buf[0] != &mem[0]) {
		return nil, violationf(ErrContract, "AllocBytes(%d) returned %d bytes that are not the block's memory", n, len(buf))
	}
	m.tag++
	stamp(mem, len(mem), m.tag)
	return m.Add(h, k, idx, n, m.tag), nil
}

func (m *clModel) sizeOf(k int) int {
	if k >= 0 && k < len(m.cls) {
		return m.cls[k].Size
	}
	return -1
}

// intact checks that b's memory kept what the model wrote.
func (m *clModel) intact(b *clBlock) error {
	mem, err := m.c.Bytes(b.Key)
	if err != nil {
		return violationf(ErrContract, "Bytes of the live %v: %v", b.Key, err)
	}
	if at, ok := stamped(mem, len(mem), b.Tag); !ok {
		return violationf(ErrAliased, "byte %d of the live %v changed: another handle shares its memory", at, b.Key)
	}
	return nil
}

func (m *clModel) free(b *clBlock) error {
	if err := m.intact(b); err != nil {
		return err
	}
	if err := m.c.Free(b.Key); err != nil {
		return violationf(ErrContract, "Free of the live %v: %v", b.Key, err)
	}
	m.Forget(b, false)
	return nil
}

// badHandle is a handle the allocator must refuse, why, and who counts it:
// the class it names, or -1 for Stats.Rejected.
type badHandle struct {
	h     classes.Handle
	why   error
	count int
}

// refused checks that every owner call with x's handle is refused as x
// says, and counts the refusals.
func (m *clModel) refused(what string, x badHandle) error {
	buf, bytesErr := m.c.Bytes(x.h)
	var rej *pool.RejectedError
	chunkErr := m.c.FreeChunk([]classes.Handle{x.h})
	for _, c := range [...]call{{"Bytes", bytesErr}, {"Free", m.c.Free(x.h)}, {"FreeChunk", chunkErr}} {
		switch {
		case c.err == nil:
			return violationf(ErrAliased, "%s of %s (%v) was accepted", c.name, what, x.h)
		case !errors.Is(c.err, x.why) || !errors.Is(c.err, pool.ErrInvalidHandle):
			return violationf(ErrContract, "%s of %s (%v) = %v, want %v", c.name, what, x.h, c.err, x.why)
		}
	}
	if !errors.As(chunkErr, &rej) || rej.Rejected != 1 || rej.First != x.h.Block() {
		return violationf(ErrContract, "FreeChunk of %s alone = %v, want a *pool.RejectedError of that one handle", what, chunkErr)
	}
	if buf != nil {
		return violationf(ErrAliased, "Bytes of %s (%v) returned %d bytes with its error", what, x.h, len(buf))
	}
	m.Refused(x.count, 3)
	return nil
}

// staleOf returns h, stale, as a badHandle.
func staleOf(h classes.Handle) badHandle {
	return badHandle{h, pool.ErrStaleHandle, h.Class()}
}

// keys returns the handles of bs.
func keys(bs []*clBlock) []classes.Handle {
	hs := make([]classes.Handle, len(bs))
	for i, b := range bs {
		hs[i] = b.Key
	}
	return hs
}

// forget drops bs from the model, as freed remotely or not.
func (m *clModel) forget(bs []*clBlock, remote bool) {
	for _, b := range bs {
		m.Forget(b, remote)
	}
}

// remoteFree frees bs through snd (one by one with single) while the owner
// drains, and checks that every block came back once.
func (m *clModel) remoteFree(r *clCase, snd ClassesSender, bs []*clBlock, single bool) error {
	hs := make([]classes.Handle, len(bs))
	for i, b := range bs {
		if err := m.intact(b); err != nil {
			return err
		}
		hs[i] = b.Key
	}
	before := snd.Submitted()
	got, reports, err := drainSending(r.ctx, m.c.Drain, true, func() error {
		if single {
			for _, h := range hs {
				mustOK("sender Free", snd.Free(h))
			}
			return nil
		}
		return contractErr(fmt.Sprintf("sender FreeChunk of %d handles", len(hs)), snd.FreeChunk(hs))
	})
	switch {
	case err != nil:
		return err
	case len(reports) > 0:
		return violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", reports[0])
	case got > len(hs):
		return violationf(ErrDuplicated, "drains freed %d blocks, the sender freed %d", got, len(hs))
	case got < len(hs):
		return violationf(ErrLost, "%d of %d blocks freed through a sender never came back: a Drain after the send returned found nothing", len(hs)-got, len(hs))
	}
	if sub := snd.Submitted() - before; sub != uint64(len(hs)) {
		return violationf(ErrAccounting, "Sender.Submitted grew by %d for %d handles sent", sub, len(hs))
	}
	m.forget(bs, true)
	return nil
}

// take allocates a block of class k with Alloc of the class's size, which
// the model says must succeed.
func (m *clModel) take(k int) (*clBlock, error) {
	b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
	if err != nil || b == nil {
		return nil, refusedOr(err, "class %d refused an allocation with %d blocks free", k, m.Counts[k].Free)
	}
	return b, nil
}

// perClass takes n blocks of every class, class by class.
func (m *clModel) perClass(n int) ([]*clBlock, error) {
	var bs []*clBlock
	for k := range m.cls {
		for range n {
			b, err := m.take(k)
			if err != nil {
				return nil, err
			}
			bs = append(bs, b)
		}
	}
	return bs, nil
}

// fillClass takes every free block of class k.
func (m *clModel) fillClass(k int) ([]*clBlock, error) {
	var bs []*clBlock
	for m.Counts[k].Free > 0 {
		b, err := m.take(k)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// freeAll frees every live block.
func (m *clModel) freeAll() {
	for len(m.Blocks) > 0 {
		must(m.free(m.Blocks[len(m.Blocks)-1]))
	}
}

// sizes returns the sizes at every class boundary and one byte either side.
func (m *clModel) sizes() []int {
	var ns []int
	for _, cl := range m.cls {
		ns = append(ns, cl.Size-1, cl.Size, cl.Size+1)
	}
	ns = append(ns, 1, 2)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	return slices.DeleteFunc(ns, func(n int) bool { return n < 1 || n > m.Largest() })
}
