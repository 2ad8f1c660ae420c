package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// instances returns models of the case's instance and of n-1 more from the
// same constructor.
func instances[X, M any](r *run[X], n int, model func(X) (M, error)) ([]M, error) {
	ms := make([]M, 0, n)
	for i := range n {
		x := r.x
		if i > 0 {
			var err error
			if x, err = r.another(); err != nil {
				return nil, err
			}
		}
		m, err := model(x)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// several makes n of something with mk; what names mk in a violation.
func several[X any](n int, what string, mk func() (X, error)) ([]X, error) {
	xs := make([]X, n)
	for i := range xs {
		x, err := mk()
		if err != nil {
			return nil, violationf(ErrContract, "%s: %v", what, err)
		}
		xs[i] = x
	}
	return xs, nil
}

// modeled returns a case that runs f on a model of the case's instance.
func modeled[X, M any](model func(X) (M, error), f func(*run[X], M) error) func(*run[X]) error {
	return func(r *run[X]) error {
		m, err := model(r.x)
		if err != nil {
			return err
		}
		return f(r, m)
	}
}

func clModeled(f func(*clCase, *clModel) error) func(*clCase) error { return modeled(newClModel, f) }
func pgModeled(f func(*pgCase, *pgModel) error) func(*pgCase) error { return modeled(newPgModel, f) }

// drainDry drains until a Drain brings nothing and returns what came. A
// drain that rejects a handle is a violation: callers send only handles
// freed once.
func drainDry(ctx context.Context, drain func() (int, error)) (int, error) {
	got := 0
	for {
		n, err := drain()
		if err != nil {
			return got, violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", err)
		}
		if n == 0 {
			return got, nil
		}
		got += n
		if ctx.Err() != nil {
			return got, violationf(ErrDeadlock, "drains kept freeing")
		}
	}
}

// mkClassHandle builds an arbitrary handle through the public encoding.
func mkClassHandle(block pool.Handle, class uint32) classes.Handle {
	var b [classes.HandleSize]byte
	enc, _ := block.AppendBinary(b[:0])
	enc = append(enc, byte(class), byte(class>>8), byte(class>>16), byte(class>>24))
	var h classes.Handle
	_ = h.UnmarshalBinary(enc) // cannot fail: enc has the right length
	return h
}

// mkRun builds an arbitrary run through the public encoding, to forge runs:
// a Run is encoded like a pool.Handle, its first page in the index.
func mkRun(poolID, first uint32, gen uint64) pages.Run {
	b, _ := mkHandle(poolID, first, gen).MarshalBinary()
	var r pages.Run
	_ = r.UnmarshalBinary(b) // cannot fail: b has the right length
	return r
}

// runPool returns the allocator id a run carries.
func runPool(r pages.Run) uint32 {
	var b [pages.RunSize]byte
	enc, _ := r.AppendBinary(b[:0])
	var h pool.Handle
	_ = h.UnmarshalBinary(enc) // cannot fail: enc has the right length
	return poolID(h)
}

// stamp writes tag into three bytes of every page of buf (its first, middle
// and last byte): enough to see two runs share a page or an offset without
// writing whole regions.
func stamp(buf []byte, size int, tag byte) {
	for p := 0; p+size <= len(buf); p += size {
		buf[p], buf[p+size/2], buf[p+size-1] = tag, tag, tag
	}
}

// stamped checks what stamp wrote and returns the first offset that lost it.
func stamped(buf []byte, size int, tag byte) (int, bool) {
	for p := 0; p+size <= len(buf); p += size {
		for _, i := range [3]int{p, p + size/2, p + size - 1} {
			if buf[i] != tag {
				return i, false
			}
		}
	}
	return 0, true
}

// disjoint writes random bytes into every buffer bufs returns, then reads
// back those it returns next, twice over (pass p draws from the seeds
// base+p and seed), and returns lost of the first buffer and byte that lost
// what was written: a write to another buffer reached it. bufs is asked
// again for every write (write set) and read, so that memory handed out
// anew on each call is caught; an error of it ends the case.
func disjoint(base, seed uint64, bufs func(write bool) ([][]byte, error), lost func(buf, at int) error) error {
	for pass := range uint64(2) {
		rng := rand.New(rand.NewPCG(base+pass, seed))
		bs, err := bufs(true)
		must(err)
		for _, b := range bs {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		}
		rng = rand.New(rand.NewPCG(base+pass, seed))
		bs, err = bufs(false)
		must(err)
		for k, b := range bs {
			for i, v := range b {
				if v != byte(rng.Uint32()) {
					return lost(k, i)
				}
			}
		}
	}
	return nil
}

// fixed returns bufs, for disjoint.
func fixed(bufs [][]byte) func(bool) ([][]byte, error) {
	return func(bool) ([][]byte, error) { return bufs, nil }
}

// fieldDiff lists the fields in which got differs from want, two values of
// one struct type.
func fieldDiff(got, want any) string {
	var parts []string
	var walk func(name string, g, w reflect.Value)
	walk = func(name string, g, w reflect.Value) {
		switch g.Kind() {
		case reflect.Struct:
			for i := range g.NumField() {
				f := g.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				sub := f.Name
				if f.Anonymous {
					sub = ""
				}
				if name != "" && sub != "" {
					sub = name + "." + sub
				} else if sub == "" {
					sub = name
				}
				walk(sub, g.Field(i), w.Field(i))
			}
		case reflect.Array, reflect.Slice:
			if g.Len() != w.Len() {
				parts = append(parts, fmt.Sprintf("%s has %d entries, want %d", name, g.Len(), w.Len()))
				return
			}
			for i := range g.Len() {
				walk(fmt.Sprintf("%s[%d]", name, i), g.Index(i), w.Index(i))
			}
		default:
			if !g.Equal(w) {
				parts = append(parts, fmt.Sprintf("%s %v, want %v", name, g.Interface(), w.Interface()))
			}
		}
	}
	walk("", reflect.ValueOf(got), reflect.ValueOf(want))
	return strings.Join(parts, "; ")
}

// wrapCycles is how many times Wraparound allocates and frees one page: past
// the wrap of a 16-bit generation (2^15 cycles, two bumps each) and of a
// 17-bit one. Wider fields cannot be reached by cycling in a test; the
// forgeries of ForgedRun flip every bit of a generation instead.
const wrapCycles = 1<<16 + 1

// wrapCycle allocates and frees one block (or page) wrapCycles times, the
// caller having made every allocation take that one, and returns the
// handles a generation that wraps would give again: those of the first
// cycles, one in 4096, and those 2^15 cycles before the last. allocWhat
// and freeWhat say, in a violation, what the failed call was.
//
// The checks of its loop are if statements: require would box its
// arguments on every one of the cycles.
func wrapCycle[H any](ctx context.Context, allocWhat, freeWhat string, alloc func() (H, error), free func(H) error) []H {
	var olds []H
	for i := range wrapCycles {
		if i%4096 == 0 && ctx.Err() != nil {
			must(violationf(ErrDeadlock, "cycle %d: stopped by the watchdog", i))
		}
		h, err := alloc()
		if err != nil {
			must(violationf(ErrContract, "cycle %d: %s: %v", i, allocWhat, err))
		}
		if i < 2 || i%4096 == 0 || i >= wrapCycles-(1<<15)-2 && i <= wrapCycles-(1<<15)+1 {
			olds = append(olds, h)
		}
		if err := free(h); err != nil {
			must(violationf(ErrContract, "cycle %d: %s: %v", i, freeWhat, err))
		}
	}
	return olds
}

// idModel is what the identity cases, which the classes and pages suites
// share, need of a model; B is one of its allocations (a block, a run).
type idModel[B any] interface {
	check(what string) error
	intact(B) error
	// placeSame places the allocations the identity cases make on every
	// allocator, alike on any fresh one; k names the allocator in a
	// violation.
	placeSame(k int) ([]B, error)
	// refusedForeign checks that b, of another allocator, is refused with
	// pool.ErrForeignHandle on every path.
	refusedForeign(what string, b B) error
}

// foreignAcross places the same allocations on every model's allocator and
// checks that each refuses every other's as foreign, keeping its own
// intact and its Stats right; then it calls each on every model, in order.
// noun is what the suite calls a handle.
func foreignAcross[M idModel[B], B any](models []M, noun string, each func(k int, m M) error) error {
	placed := make([][]B, len(models))
	for k, m := range models {
		var err error
		placed[k], err = m.placeSame(k)
		must(err)
	}
	for k, m := range models {
		for j, bs := range placed {
			if j == k {
				continue
			}
			for _, b := range bs {
				must(m.refusedForeign(fmt.Sprintf("a %s of allocator %d, given to allocator %d,", noun, j, k), b))
			}
		}
	}
	for k, m := range models {
		for _, b := range placed[k] {
			mustIn(m.intact(b), "allocator %d", k)
		}
		must(m.check(fmt.Sprintf("allocator %d, after the others' %ss were refused", k, noun)))
		must(each(k, m))
	}
	return nil
}

// closedIdentity checks that the allocations of a closed allocator are
// foreign to allocators made after it, also when those hand out the very
// same blocks or runs (an allocator that recycles the ids of closed ones
// would hand out equal handles). noun is what the suite calls a handle.
func closedIdentity[X interface{ Close() error }, M idModel[B], B any](r *run[X], noun string, model func(X) (M, error)) error {
	var olds []B
	for k := range 3 {
		x, err := r.another()
		must(err)
		m, err := model(x)
		must(err)
		bs, err := m.placeSame(k)
		must(err)
		for _, o := range olds {
			must(m.refusedForeign(fmt.Sprintf("a %s of an allocator closed before allocator %d was made,", noun, k), o))
		}
		after := fmt.Sprintf("allocator %d, after the %ss of closed allocators were refused", k, noun)
		for _, b := range bs {
			mustIn(m.intact(b), "%s", after)
		}
		must(m.check(after))
		olds = append(olds, bs...)
		mustOK("Close", x.Close())
	}
	return nil
}
