package classes_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pool"
)

// fuzzSubjects returns what both fuzz targets drive: a three-class
// allocator, its classes, a live handle of another allocator of the same
// classes, and a sender; all closed when t ends.
func fuzzSubjects(t *testing.T) (*classes.DefaultPool, []classes.Class, classes.Handle, *classes.Sender) {
	cs := []classes.Class{{Size: 16, Blocks: 4}, {Size: 64, Blocks: 3}, {Size: 256, Blocks: 2}}
	c, err := classes.Default(cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	other, _ := classes.Default(cs)
	t.Cleanup(func() { _ = other.Close() })
	foreign, _ := other.Alloc(1)
	snd, _ := c.NewSender()
	return c, cs, foreign, snd
}

// fuzzModel returns the model of an allocator of the classes cs, every
// block free.
func fuzzModel(cs []classes.Class) *model.Sizes[classes.Handle] {
	mcs := make([]model.Class, len(cs))
	for k, cl := range cs {
		mcs[k] = model.Class{Size: cl.Size, Blocks: cl.Blocks}
	}
	return model.NewSizes[classes.Handle](mcs)
}

// allocated checks what an allocation (what) of n bytes from class k gave,
// h and err, against the model m: a full class refuses it, any other
// hands out a block of class k that no live handle holds. It then writes
// the next tag into the block, adds it to the model and reports true.
func allocated(t *testing.T, c *classes.DefaultPool, m *model.Sizes[classes.Handle], tag *byte, step int, what string, k, n int, h classes.Handle, err error) bool {
	t.Helper()
	if m.Counts[k].Free == 0 {
		if !errors.Is(err, pool.ErrExhausted) {
			t.Fatalf("step %d: %s with class %d full = %v, %v", step, what, k, h, err)
		}
		return false
	}
	if err != nil || h.Class() != k {
		t.Fatalf("step %d: %s = %v, %v; want a block of class %d", step, what, h, err, k)
	}
	if _, dup := m.Live[h]; dup || m.Taken[k][h.Block().Index()] {
		t.Fatalf("step %d: %v handed out twice", step, h)
	}
	*tag++
	buf, _ := c.Bytes(h)
	for i := range buf {
		buf[i] = *tag
	}
	m.Add(h, k, h.Block().Index(), n, *tag)
	return true
}

// checkStats compares the allocator's stats with the model's counts.
func checkStats(c *classes.DefaultPool, m *model.Sizes[classes.Handle]) error {
	st := c.Stats()
	if st.Rejected != m.Rejected {
		return fmt.Errorf("Rejected %d, want %d", st.Rejected, m.Rejected)
	}
	for k, got := range st.Classes {
		w := m.Counts[k]
		if got.Live != w.Live || got.Free != w.Free || got.HighWater != w.HighWater || got.Allocs != w.Allocs || got.Frees != w.Frees ||
			got.Requested != w.Requested || got.RemoteSubmitted != w.RemoteSubmitted ||
			got.RemoteDrained != w.RemoteDrained || got.Rejected != w.Rejected {
			return fmt.Errorf("class %d: stats %+v; model %+v", k, got, w)
		}
	}
	return nil
}

// FuzzOps decodes bytes, with the decoder the conformance suite drives its
// allocators with (model.Sizes.Next), into allocations of every class and
// way, local frees, mixed chunks, remote frees, drains and frees of stale
// handles (with a foreign and a re-classed one beside each) and of handles
// naming no class, on a three-class allocator and on the model, and
// compares every result and the stats after every step.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 10, 0, 200, 0, 100, 1, 2, 3, 0, 4, 5, 6, 7})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 12, 0, 13, 0, 14, 0, 15, 1, 16, 2, 17, 0, 19})
	f.Add([]byte{0, 255, 0, 0, 5, 6, 0, 64, 0, 65, 2, 1, 2, 1, 3, 3, 12, 20, 28, 36})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, cs, foreign, snd := fuzzSubjects(t)
		var err error
		m := fuzzModel(cs)
		tag := byte(0)
		// drain drains until a Drain brings nothing and returns what came.
		drain := func(step int) int {
			got := 0
			for {
				n, err := c.Drain()
				if err != nil {
					t.Fatalf("step %d: a drain rejected handles freed once each: %v", step, err)
				}
				if got += n; n == 0 {
					return got
				}
			}
		}
		src := model.NewBytes(data)
		for step := 0; !src.Done(); step++ {
			switch op := m.Next(src); op.Kind {
			case model.SizesAlloc:
				k, n := op.Class, op.N
				if op.How != 2 {
					k = m.ClassFor(n)
				}
				var h classes.Handle
				var err error
				switch op.How {
				case 0:
					h, err = c.Alloc(n)
				case 1:
					h, _, err = c.AllocBytes(n)
				default:
					h, err = c.AllocClass(k, n)
				}
				allocated(t, c, m, &tag, step, fmt.Sprintf("allocation %+v", op), k, n, h, err)
			case model.SizesFree:
				b := op.Blocks[0]
				if buf, err := c.Bytes(b.Key); err != nil || buf[0] != b.Tag || buf[len(buf)-1] != b.Tag || len(buf) != m.Classes[b.Class].Size {
					t.Fatalf("step %d: Bytes(%v) = %d bytes, %v; model tag %d", step, b.Key, len(buf), err, b.Tag)
				}
				if err := c.Free(b.Key); err != nil {
					t.Fatalf("step %d: Free(%v) = %v", step, b.Key, err)
				}
				m.Forget(b, false)
			case model.SizesFreeChunk, model.SizesRemote:
				hs := make([]classes.Handle, len(op.Blocks))
				for i, b := range op.Blocks {
					hs[i] = b.Key
				}
				switch {
				case op.Kind == model.SizesFreeChunk:
					err = c.FreeChunk(hs)
				case op.Single:
					for _, h := range hs {
						if err = snd.Free(h); err != nil {
							break
						}
					}
				default:
					err = snd.FreeChunk(hs)
				}
				if err != nil {
					t.Fatalf("step %d: freeing %v (%+v) = %v", step, hs, op, err)
				}
				if op.Kind == model.SizesRemote {
					if got := drain(step); got != len(hs) {
						t.Fatalf("step %d: drains freed %d of %d blocks freed through a sender", step, got, len(hs))
					}
				}
				for _, b := range op.Blocks {
					m.Forget(b, op.Kind == model.SizesRemote)
				}
			case model.SizesStale:
				for _, x := range []struct {
					h     classes.Handle
					want  error
					class int
				}{{op.Key, pool.ErrStaleHandle, op.Key.Class()}, {foreign, pool.ErrForeignHandle, foreign.Class()}} {
					if err := c.Free(x.h); !errors.Is(err, x.want) {
						t.Fatalf("step %d: Free(%v) = %v, want %v", step, x.h, err, x.want)
					}
					m.Refused(x.class, 1)
				}
				if len(m.Blocks) > 0 { // a live block re-classed
					b := m.Blocks[0]
					k := (b.Class + 1) % len(cs)
					h := reclass(b.Key, k)
					if _, err := c.Bytes(h); !errors.Is(err, pool.ErrInvalidHandle) {
						t.Fatalf("step %d: Bytes of %v re-classed to %d = %v", step, b.Key, k, err)
					}
					m.Refused(k, 1)
				}
			case model.SizesUnknown:
				h := reclass(op.Blocks[0].Key, op.Unknown)
				if err := c.Free(h); !errors.Is(err, classes.ErrUnknownClass) {
					t.Fatalf("step %d: Free of %v = %v, want ErrUnknownClass", step, h, err)
				}
				m.Refused(-1, 1)
			case model.SizesDrain:
				if got := drain(step); got != 0 {
					t.Fatalf("step %d: drains freed %d blocks, none was freed remotely", step, got)
				}
			}
			// Beside the shared decoder's ops, one byte picks a check of
			// this allocator's own edges, none of which the suite drives.
			switch x := src.IntN(8); {
			case x == 0: // sizes no class takes change nothing
				for _, n := range []int{0, -1, m.Largest() + 1} {
					_, err := c.Alloc(n)
					_, _, berr := c.AllocBytes(n)
					if !errors.Is(err, pool.ErrInvalidArgument) || !errors.Is(berr, pool.ErrInvalidArgument) ||
						(n > 0 && (!errors.Is(err, classes.ErrTooLarge) || !errors.Is(berr, classes.ErrTooLarge))) {
						t.Fatalf("step %d: Alloc(%d) = %v, AllocBytes = %v; want a refused size", step, n, err, berr)
					}
				}
				for k, cl := range cs {
					if _, err := c.AllocClass(k, cl.Size+1); !errors.Is(err, pool.ErrInvalidArgument) {
						t.Fatalf("step %d: AllocClass(%d, %d) = %v", step, k, cl.Size+1, err)
					}
				}
			case x == 1 && len(m.Blocks) > 0: // a remote free the owner overtakes: freed locally, rejected at the drain
				b := m.Blocks[0]
				if err := snd.Free(b.Key); err != nil {
					t.Fatalf("step %d: Sender.Free(%v) = %v", step, b.Key, err)
				}
				if err := c.Free(b.Key); err != nil {
					t.Fatalf("step %d: Free(%v) before the drain = %v", step, b.Key, err)
				}
				m.Send(b.Class, b.Key)
				m.Forget(b, false)
				n, err := c.Drain()
				if freed, refused := m.Deliver(b.Class); n != freed || refused != 1 || !errors.Is(err, pool.ErrStaleHandle) {
					t.Fatalf("step %d: the drain of an overtaken remote free = %d, %v; want 0 and a stale handle", step, n, err)
				}
			case x == 2 && len(m.Blocks) > 0: // a chunk with a handle naming no class: the good one is freed
				b := m.Blocks[0]
				err := c.FreeChunk([]classes.Handle{b.Key, reclass(classes.Handle{}, len(cs)+5)})
				if !errors.Is(err, classes.ErrUnknownClass) {
					t.Fatalf("step %d: FreeChunk with a class-less handle = %v", step, err)
				}
				m.Forget(b, false)
				m.Refused(-1, 1)
			}
			if err := checkStats(c, m); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	})
}
