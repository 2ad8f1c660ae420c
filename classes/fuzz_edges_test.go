package classes_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

// edgeModel is an obviously correct size-class allocator: per class a count of
// free blocks, the live handles with the byte written into each, and the
// remote frees in flight. FuzzEdges runs the same operations on it and on a
// real classes.Pool.
type edgeModel struct {
	sizes    []int
	cls      []edgeClass
	rejected uint64 // handles naming no class
}

type edgeClass struct {
	free     int
	live     map[classes.Handle]byte
	inflight []classes.Handle
	unsaid   bool // a drain rejected handles that no Drain has reported yet
	want     classes.ClassStats
}

func newEdgeModel(cs []classes.Class) *edgeModel {
	m := &edgeModel{}
	for _, c := range cs {
		m.sizes = append(m.sizes, c.Size)
		m.cls = append(m.cls, edgeClass{free: c.Blocks, live: map[classes.Handle]byte{}})
	}
	return m
}

// drain delivers class k's remote frees, in order: live handles are freed,
// the others (freed meanwhile, or sent twice) rejected.
func (m *edgeModel) drain(k int) int {
	c := &m.cls[k]
	n := 0
	for _, h := range c.inflight {
		c.want.RemoteDrained++
		if _, ok := c.live[h]; ok {
			delete(c.live, h)
			c.free++
			c.want.Frees++
			n++
		} else {
			c.want.Rejected++
			c.unsaid = true
		}
	}
	c.inflight = c.inflight[:0]
	return n
}

func (m *edgeModel) check(c *classes.DefaultPool) error {
	st := c.Stats()
	if st.Rejected != m.rejected {
		return fmt.Errorf("Rejected %d, want %d", st.Rejected, m.rejected)
	}
	for k, got := range st.Classes {
		mc := &m.cls[k]
		w := mc.want
		if got.Live != len(mc.live) || got.Free != mc.free || got.Allocs != w.Allocs || got.Frees != w.Frees ||
			got.Requested != w.Requested || got.RemoteSubmitted != w.RemoteSubmitted ||
			got.RemoteDrained != w.RemoteDrained || got.Rejected != w.Rejected {
			return fmt.Errorf("class %d: stats %+v; edgeModel: live %d free %d %+v", k, got, len(mc.live), mc.free, w)
		}
	}
	return nil
}

// FuzzEdges keeps the size-class allocator's own edges that the shared
// decoder FuzzOps drives (model.Sizes.Next, the conformance suite's op
// stream) does not reach: remote frees left pending across later ops (an
// allocation on a full class then drains them), a handle freed remotely
// twice and the drain's rejection, a sender's chunk holding a class-less
// handle, local chunks mixing live and stale handles, Bytes of a stale
// handle and the zero handle. It keeps a model of its own for them: it
// decodes bytes into allocations of every size (and bad sizes), local and
// remote frees (single and chunked, of live, stale, foreign, re-classed and
// class-less handles) and drains on a three-class allocator and on the
// model, and compares every result and the stats after every step.
func FuzzEdges(f *testing.F) {
	f.Add([]byte{0, 10, 0, 200, 0, 100, 1, 2, 3, 0, 4, 5, 6, 7})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 2, 0, 2, 0, 3, 0, 1, 4, 9, 4, 17})
	f.Add([]byte{0, 255, 0, 0, 5, 6, 0, 64, 0, 65, 2, 1, 2, 1, 3, 3, 12, 20, 28, 36})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, cs, foreign, s := fuzzSubjects(t)
		m := newEdgeModel(cs)
		var live, stale []classes.Handle // live: in allocation order; may hold handles already sent remotely
		tag := byte(0)
		pos := 0
		next := func() int {
			if pos >= len(data) {
				return 0
			}
			pos++
			return int(data[pos-1])
		}
		pick := func(arg int) (classes.Handle, bool) {
			if len(live) == 0 {
				return classes.Handle{}, false
			}
			return live[arg%len(live)], true
		}
		dropLive := func(h classes.Handle) {
			if i := slices.Index(live, h); i >= 0 {
				live = append(live[:i], live[i+1:]...)
			}
			stale = append(stale, h)
		}
		bad := func(arg int) (classes.Handle, bool) {
			hs := []classes.Handle{{}, foreign}
			if len(stale) > 0 {
				hs = append(hs, stale[arg%len(stale)])
			}
			if h, ok := pick(arg); ok {
				hs = append(hs, reclass(h, (h.Class()+1+arg%2)%3), reclass(h, 3+arg%7))
			}
			h := hs[arg%len(hs)]
			if h.Class() >= len(cs) {
				return h, true // names no class
			}
			// A stale handle may have been reused: it is bad only if no
			// live handle equals it, which generations guarantee.
			return h, false
		}
		for step := 0; pos < len(data); step++ {
			op := next()
			arg := op >> 3
			switch op & 7 {
			case 0: // alloc
				n := next() + arg - 1 // -1 to 285: every class and beyond
				k := slices.IndexFunc(m.sizes, func(s int) bool { return n <= s })
				h, err := c.Alloc(n)
				if n <= 0 || k < 0 {
					if !errors.Is(err, pool.ErrInvalidArgument) || (k < 0 && n > 0 && !errors.Is(err, classes.ErrTooLarge)) {
						t.Fatalf("step %d: Alloc(%d) = %v, %v; want a refused size", step, n, h, err)
					}
					break
				}
				mc := &m.cls[k]
				if mc.free == 0 && len(mc.inflight) > 0 {
					m.drain(k)
				}
				if mc.free == 0 {
					if !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("step %d: Alloc(%d) with class %d full = %v, %v", step, n, k, h, err)
					}
					break
				}
				if err != nil || h.Class() != k {
					t.Fatalf("step %d: Alloc(%d) = %v, %v; want a block of class %d", step, n, h, err, k)
				}
				if _, dup := mc.live[h]; dup {
					t.Fatalf("step %d: %v handed out twice", step, h)
				}
				tag++
				buf, _ := c.Bytes(h)
				for i := range buf {
					buf[i] = tag
				}
				mc.live[h] = tag
				mc.free--
				mc.want.Allocs++
				mc.want.Requested += uint64(n)
				live = append(live, h)
			case 1: // local free of a live handle
				h, ok := pick(arg)
				if !ok {
					break
				}
				mc := &m.cls[h.Class()]
				_, isLive := mc.live[h] // false if sent remotely and drained since
				err := c.Free(h)
				if isLive != (err == nil) {
					t.Fatalf("step %d: Free(%v) = %v; edgeModel live: %v", step, h, err, isLive)
				}
				if isLive {
					delete(mc.live, h)
					mc.free++
					mc.want.Frees++
				} else {
					mc.want.Rejected++
				}
				dropLive(h)
			case 2: // remote free of a live handle; it stays usable until drained
				h, ok := pick(arg)
				if !ok {
					break
				}
				if err := s.Free(h); err != nil {
					t.Fatalf("step %d: Sender.Free(%v) = %v", step, h, err)
				}
				mc := &m.cls[h.Class()]
				mc.inflight = append(mc.inflight, h)
				mc.want.RemoteSubmitted++
				if arg&1 == 0 {
					dropLive(h)
				}
			case 3: // drain
				n, err := c.Drain()
				want, rejects := 0, false
				for k := range m.cls {
					want += m.drain(k)
					rejects = rejects || m.cls[k].unsaid
					m.cls[k].unsaid = false
				}
				if n != want || rejects != (err != nil) || (err != nil && !errors.Is(err, pool.ErrInvalidHandle)) {
					t.Fatalf("step %d: Drain = %d, %v; the edgeModel drains %d (rejections: %v)", step, n, err, want, rejects)
				}
			case 4: // bad handle
				h, noClass := bad(arg)
				if _, ok := m.clsOf(h); ok && !noClass {
					break // a stale handle that equals a live one cannot exist; skip the impossible
				}
				err := c.Free(h)
				if !errors.Is(err, pool.ErrInvalidHandle) {
					t.Fatalf("step %d: Free of bad %v = %v", step, h, err)
				}
				if noClass {
					if !errors.Is(err, classes.ErrUnknownClass) {
						t.Fatalf("step %d: Free of %v = %v, want ErrUnknownClass", step, h, err)
					}
					m.rejected++
				} else {
					m.cls[h.Class()].want.Rejected++
				}
			case 5, 6: // a chunk of up to three live handles and maybe a bad one, local or remote
				var chunk []classes.Handle
				for i := range 1 + arg%3 {
					if h, ok := pick(arg + i); ok && !slices.Contains(chunk, h) {
						chunk = append(chunk, h)
					}
				}
				withBad := arg&4 != 0
				if withBad {
					chunk = append(chunk, reclass(classes.Handle{}, 9))
				}
				if op&7 == 5 {
					err := c.FreeChunk(chunk)
					wantRej := 0
					for _, h := range chunk {
						if h.Class() >= len(cs) {
							m.rejected++
							wantRej++
							continue
						}
						mc := &m.cls[h.Class()]
						if _, ok := mc.live[h]; ok {
							delete(mc.live, h)
							mc.free++
							mc.want.Frees++
						} else {
							mc.want.Rejected++
							wantRej++
						}
						dropLive(h)
					}
					var re *pool.RejectedError
					if (wantRej == 0) != (err == nil) || (err != nil && (!errors.As(err, &re) || re.Rejected != wantRej)) {
						t.Fatalf("step %d: FreeChunk(%v) = %v, want %d rejected", step, chunk, err, wantRej)
					}
				} else {
					err := s.FreeChunk(chunk)
					if withBad != (err != nil) || (withBad && !errors.Is(err, classes.ErrUnknownClass)) {
						t.Fatalf("step %d: Sender.FreeChunk(%v) = %v", step, chunk, err)
					}
					for _, h := range chunk {
						if h.Class() >= len(cs) {
							m.rejected++
							continue
						}
						mc := &m.cls[h.Class()]
						mc.inflight = append(mc.inflight, h)
						mc.want.RemoteSubmitted++
						dropLive(h)
					}
				}
			case 7: // read a live block back
				h, ok := pick(arg)
				if !ok {
					break
				}
				want, isLive := m.cls[h.Class()].live[h]
				buf, err := c.Bytes(h)
				if isLive != (err == nil) || (isLive && (buf[0] != want || buf[len(buf)-1] != want || len(buf) != m.sizes[h.Class()])) {
					t.Fatalf("step %d: Bytes(%v) = %d bytes, %v; edgeModel live %v tag %d", step, h, len(buf), err, isLive, want)
				}
				if !isLive {
					m.cls[h.Class()].want.Rejected++
					dropLive(h)
				}
			}
			if err := m.check(c); err != nil {
				t.Fatalf("step %d (op %d): %v", step, op&7, err)
			}
		}
	})
}

// clsOf reports whether h is live in the edgeModel.
func (m *edgeModel) clsOf(h classes.Handle) (int, bool) {
	for k := range m.cls {
		if _, ok := m.cls[k].live[h]; ok {
			return k, true
		}
	}
	return 0, false
}
