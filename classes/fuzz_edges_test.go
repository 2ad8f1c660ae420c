package classes_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

// FuzzEdges keeps the size-class allocator's own edges that the shared
// decoder FuzzOps drives (model.Sizes.Next, the conformance suite's op
// stream) does not reach: remote frees left pending across later ops (an
// allocation on a full class then drains them), a handle freed remotely
// twice and the drain's rejection, a sender's chunk holding a class-less
// handle, local chunks mixing live and stale handles, Bytes of a stale
// handle and the zero handle. It has a decoder of its own for them, over
// the same model (model.Sizes, its pending remote frees included): it
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
		m := fuzzModel(cs)
		unsaid := false                  // a drain rejected handles that no Drain has reported yet
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
				k := m.ClassFor(n)
				h, err := c.Alloc(n)
				if k < 0 {
					if !errors.Is(err, pool.ErrInvalidArgument) || (k < 0 && n > 0 && !errors.Is(err, classes.ErrTooLarge)) {
						t.Fatalf("step %d: Alloc(%d) = %v, %v; want a refused size", step, n, h, err)
					}
					break
				}
				if m.Counts[k].Free == 0 && len(m.Pending[k]) > 0 {
					_, refused := m.Deliver(k)
					unsaid = unsaid || refused > 0
				}
				if allocated(t, c, m, &tag, step, fmt.Sprintf("Alloc(%d)", n), k, n, h, err) {
					live = append(live, h)
				}
			case 1: // local free of a live handle
				h, ok := pick(arg)
				if !ok {
					break
				}
				b, isLive := m.Live[h] // false if sent remotely and drained since
				err := c.Free(h)
				if isLive != (err == nil) {
					t.Fatalf("step %d: Free(%v) = %v; model live: %v", step, h, err, isLive)
				}
				if isLive {
					m.Forget(b, false)
				} else {
					m.Refused(h.Class(), 1)
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
				m.Send(h.Class(), h)
				if arg&1 == 0 {
					dropLive(h)
				}
			case 3: // drain
				n, err := c.Drain()
				want, rejects := 0, unsaid
				for k := range cs {
					freed, refused := m.Deliver(k)
					want += freed
					rejects = rejects || refused > 0
				}
				unsaid = false
				if n != want || rejects != (err != nil) || (err != nil && !errors.Is(err, pool.ErrInvalidHandle)) {
					t.Fatalf("step %d: Drain = %d, %v; the model drains %d (rejections: %v)", step, n, err, want, rejects)
				}
			case 4: // bad handle
				h, noClass := bad(arg)
				if _, ok := m.Live[h]; ok && !noClass {
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
					m.Refused(-1, 1)
				} else {
					m.Refused(h.Class(), 1)
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
							m.Refused(-1, 1)
							wantRej++
							continue
						}
						if b, ok := m.Live[h]; ok {
							m.Forget(b, false)
						} else {
							m.Refused(h.Class(), 1)
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
							m.Refused(-1, 1)
							continue
						}
						m.Send(h.Class(), h)
						dropLive(h)
					}
				}
			case 7: // read a live block back
				h, ok := pick(arg)
				if !ok {
					break
				}
				b, isLive := m.Live[h]
				buf, err := c.Bytes(h)
				if isLive != (err == nil) || (isLive && (buf[0] != b.Tag || buf[len(buf)-1] != b.Tag || len(buf) != m.Classes[h.Class()].Size)) {
					t.Fatalf("step %d: Bytes(%v) = %d bytes, %v; model live %v (%+v)", step, h, len(buf), err, isLive, b)
				}
				if !isLive {
					m.Refused(h.Class(), 1)
					dropLive(h)
				}
			}
			if err := checkStats(c, m); err != nil {
				t.Fatalf("step %d (op %d): %v", step, op&7, err)
			}
		}
	})
}
