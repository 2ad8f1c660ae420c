package pages_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// FuzzEdges keeps the page allocator's fuzz target from before FuzzOps
// moved onto the shared decoder (model.Region.Next, the conformance
// suite's op stream): its own decoder and op mix (runs of up to 8 pages as
// often as short ones, picks by allocation order, exact placement by fit),
// and the regression inputs saved for it. FuzzOps covers the suite's ops;
// this one the mix the suite's stream draws rarely. It drives the same
// model as FuzzOps (model.Region, picked from in allocation order with
// InOrder) and compares every result, the first page the fit chose (one
// of Allowed's free runs), every eviction in order and the stats after
// every step.
func FuzzEdges(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 5, 0, 7, 2, 0, 5, 1, 4, 9})
	f.Add([]byte{1, 8, 31, 16, 31, 5, 13, 5, 21, 0, 31, 6, 7})
	f.Add([]byte{2, 8, 20, 8, 20, 5, 13, 5, 21, 8, 20, 23, 3, 11})
	f.Add([]byte{3, 16, 7, 24, 9, 16, 12, 5, 13, 5, 21, 5, 29, 0, 15, 6, 14, 30})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		const n = fuzzPages
		w, foreign := newFuzzRun(t, data[0])
		p, m := w.p, w.m
		var stale []pages.Run // every run freed or evicted, in order: the decoder's, unbounded
		tag := byte(0)

		pos := 1
		next := func() int {
			if pos >= len(data) {
				return 0
			}
			pos++
			return int(data[pos-1])
		}
		pick := func(arg int) *model.Run[pages.Run] {
			live := m.InOrder()
			if len(live) == 0 {
				return nil
			}
			return live[arg%len(live)]
		}
		for step := 0; pos < len(data); step++ {
			op := next()
			arg := op >> 3
			w.heard = w.heard[:0]
			switch op & 7 {
			case 0, 1: // alloc
				size := next()
				want := 1 + size%8
				if size >= 224 {
					want = 1 + size%n
				}
				c := arg % len(fuzzTypes)
				room, placed := m.Evicting(want, c)
				allowed := m.Allowed(want)
				r, err := p.Alloc(want, pages.Content(c))
				var marked []*model.Run[pages.Run]
				if !placed {
					if !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("step %d: Alloc(%d, %d) = %v, %v; the model has no room", step, want, c, r, err)
					}
					m.Failed++
				} else {
					first, got, serr := p.Span(r)
					// Exact placement: the first page of a free run the fit allows.
					in := slices.ContainsFunc(allowed, func(g [2]int) bool { return g[0] == first && want <= g[1] })
					if err != nil || serr != nil || got != want || !in {
						t.Fatalf("step %d: Alloc(%d, %d) = %v, %v (span %d+%d, %v); the model allows the free runs %v",
							step, want, c, r, err, first, got, serr, allowed)
					}
					tag++
					buf, _ := p.Bytes(r)
					for i := range buf {
						buf[i] = tag
					}
					m.Add(r, first, want, c, tag)
					marked = m.Reclaim()
				}
				if w.err != nil {
					t.Fatalf("step %d: %v", step, w.err)
				}
				evicted := keys(room, marked)
				if !slices.Equal(w.heard, evicted) {
					t.Fatalf("step %d: Alloc(%d, %d) evicted %v, the model %v", step, want, c, w.heard, evicted)
				}
				stale = append(stale, evicted...)
			case 2: // free a live run
				x := pick(arg)
				if x == nil {
					break
				}
				w.free(t, step, x)
				stale = append(stale, x.Key)
			case 3: // free a stale, foreign or zero run
				bad := []pages.Run{{}, foreign}
				if len(stale) > 0 {
					bad = append(bad, stale[arg%len(stale)])
				}
				i := arg % len(bad)
				if arg&1 == 1 {
					i = len(bad) - 1
				}
				r, why := bad[i], []error{pool.ErrZeroHandle, pool.ErrForeignHandle, pool.ErrStaleHandle}[i]
				var err error
				switch arg % 3 {
				case 0:
					err = p.Free(r)
				case 1:
					err = p.Pin(r)
				default:
					_, _, err = p.Span(r)
				}
				if !errors.Is(err, pool.ErrInvalidHandle) || !errors.Is(err, why) {
					t.Fatalf("step %d: call with bad run %v = %v, want %v", step, r, err, why)
				}
				m.Rejected++
			case 4: // pin
				x := pick(arg)
				if x == nil {
					break
				}
				w.pin(t, step, x)
			case 5: // unpin
				x := pick(arg)
				if x == nil {
					break
				}
				w.unpin(t, step, x)
			case 6: // evict
				stale = append(stale, keys(w.evict(t, step, arg%8))...)
			case 7: // read a live run back
				x := pick(arg)
				if x == nil {
					break
				}
				first, got, err := p.Span(x.Key)
				c, cerr := p.Content(x.Key)
				pins, perr := p.Pins(x.Key)
				buf, berr := p.Bytes(x.Key)
				if err != nil || cerr != nil || perr != nil || berr != nil || first != x.First || got != x.N || int(c) != x.C || pins != x.Pins ||
					len(buf) != x.N*fuzzPageSize || buf[0] != x.Tag || buf[len(buf)-1] != x.Tag {
					t.Fatalf("step %d: run %v reads %d+%d content %d pins %d, %d bytes (%v %v %v %v); the model has %+v",
						step, x.Key, first, got, c, pins, len(buf), err, cerr, perr, berr, *x)
				}
			}
			if err := w.checkStats(); err != nil {
				t.Fatalf("step %d (op %d): %v", step, op&7, err)
			}
		}
		w.freeAll(t)
	})
}
