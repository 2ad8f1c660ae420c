package pages_test

// The contract checks of a run allocator: the cases a conformance suite for
// contiguous page runs would hold. They take the allocator through the small
// runAllocator interface, so that they can run over pages.Pool (any backing,
// either fit) and over the deliberately broken allocators of
// broken_test.go, which they must reject.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/pool"
)

// runAllocator is the surface the checks exercise. R is its run handle.
type runAllocator[R comparable] interface {
	// Alloc hands out a run of n contiguous pages.
	Alloc(n int) (R, error)
	Free(r R) error
	// Span returns a live run's first page and length in pages.
	Span(r R) (first, n int, err error)
	// Bytes returns a live run's memory: n × PageSize bytes.
	Bytes(r R) ([]byte, error)
	Accounting() accounting
	Close() error
}

// accounting is what the checks compare against their own bookkeeping.
type accounting struct {
	PageSize, Pages                   int
	Used, Free, LargestFree, FreeRuns int
	Runs                              int
	Allocs, Frees                     uint64
}

// runCase is one contract: a name, the contract in words, and a check that
// returns what it found broken. newA makes a fresh allocator of at least 64
// pages; check calls it once, or twice for a foreign allocator.
type runCase[R comparable] struct {
	name        string
	explanation string
	check       func(newA func() (runAllocator[R], error)) error
}

// violation reports a broken contract of one case.
type violation struct {
	name, explanation string
	err               error
}

func (v *violation) Error() string {
	return fmt.Sprintf("%s: %v\n\tcontract: %s", v.name, v.err, v.explanation)
}

func (v *violation) Unwrap() error { return v.err }

// checkRuns runs every case on fresh allocators and returns the violations
// joined, nil if none.
func checkRuns[R comparable](newA func() (runAllocator[R], error)) error {
	var errs []error
	for _, c := range runCases[R]() {
		if err := c.check(newA); err != nil {
			errs = append(errs, &violation{c.name, c.explanation, err})
		}
	}
	return errors.Join(errs...)
}

func runCases[R comparable]() []runCase[R] {
	return []runCase[R]{
		{"churn", "under random allocations and frees, live runs never share a page or a byte, " +
			"an allocation fails only when no free run is long enough, and the accounting " +
			"(pages used and free, runs, maximal free runs, the longest free run) is exact after every call", checkChurn[R]},
		{"rejects", "a freed, double-freed, reused, foreign or zero run is rejected by Free, Span and " +
			"Bytes with an error matching pool.ErrInvalidHandle and changes nothing", checkRejects[R]},
		{"merge", "freeing a run merges it with its free neighbours in every order, so freeing " +
			"everything leaves one free run the size of the region", checkMerge[R]},
		{"exhaustion", "an allocation that cannot be placed fails with pool.ErrExhausted and changes " +
			"nothing, also when enough pages are free but not contiguous", checkExhaustion[R]},
		{"arguments", "runs of 0, negative or more than all pages are refused with " +
			"pool.ErrInvalidArgument and change nothing", checkArguments[R]},
		{"closed", "after Close every call fails with pool.ErrClosed", checkClosed[R]},
	}
}

// live is the checks' own record of an allocator's runs.
type live[R comparable] struct {
	a      runAllocator[R]
	owner  []int // page -> tag of the live run that holds it, 0 if free
	runs   map[R]span
	tag    int
	frees  uint64
	allocs uint64
}

type span struct{ first, n, tag int }

func newLive[R comparable](a runAllocator[R]) *live[R] {
	return &live[R]{a: a, owner: make([]int, a.Accounting().Pages), runs: map[R]span{}}
}

// withLive runs f on a fresh allocator and its record, and closes it.
func withLive[R comparable](newA func() (runAllocator[R], error), f func(*live[R]) error) error {
	a, err := newA()
	if err != nil {
		return err
	}
	defer a.Close()
	return f(newLive(a))
}

// alloc allocates n pages and checks the run against the record: in range,
// of length n, on free pages, with memory of the right size.
func (l *live[R]) alloc(n int) (R, error) {
	r, err := l.a.Alloc(n)
	if err != nil {
		return r, err
	}
	first, got, err := l.a.Span(r)
	if err != nil {
		return r, fmt.Errorf("Span of a new run: %v", err)
	}
	if got != n || first < 0 || first+n > len(l.owner) {
		return r, fmt.Errorf("Alloc(%d) gave pages [%d, %d) of %d", n, first, first+got, len(l.owner))
	}
	for p := first; p < first+n; p++ {
		if l.owner[p] != 0 {
			return r, fmt.Errorf("Alloc(%d) gave page %d, which live run %d holds", n, p, l.owner[p])
		}
	}
	if _, dup := l.runs[r]; dup {
		return r, fmt.Errorf("Alloc(%d) returned a live run's handle %v again", n, r)
	}
	buf, err := l.a.Bytes(r)
	if ps := l.a.Accounting().PageSize; err != nil || len(buf) != n*ps || cap(buf) != len(buf) {
		return r, fmt.Errorf("Bytes of a %d-page run: len %d cap %d err %v, want %d bytes", n, len(buf), cap(buf), err, n*ps)
	}
	l.tag++
	for p := first; p < first+n; p++ {
		l.owner[p] = l.tag
	}
	for i := range buf {
		buf[i] = byte(l.tag)
	}
	l.runs[r] = span{first, n, l.tag}
	l.allocs++
	return r, nil
}

// free frees a live run after checking that its memory kept its tag.
func (l *live[R]) free(r R) error {
	s := l.runs[r]
	if err := l.checkBytes(r, s); err != nil {
		return err
	}
	if err := l.a.Free(r); err != nil {
		return fmt.Errorf("Free of a live run: %v", err)
	}
	for p := s.first; p < s.first+s.n; p++ {
		l.owner[p] = 0
	}
	delete(l.runs, r)
	l.frees++
	return nil
}

func (l *live[R]) checkBytes(r R, s span) error {
	buf, err := l.a.Bytes(r)
	if err != nil {
		return fmt.Errorf("Bytes of a live run: %v", err)
	}
	for i, b := range buf {
		if b != byte(s.tag) {
			return fmt.Errorf("byte %d of run [%d, %d) is %#x, want its tag %#x: another run wrote it", i, s.first, s.first+s.n, b, byte(s.tag))
		}
	}
	return nil
}

// gaps returns the maximal free runs of the record as (first, n) pairs.
func (l *live[R]) gaps() [][2]int {
	var g [][2]int
	for p := 0; p < len(l.owner); {
		if l.owner[p] != 0 {
			p++
			continue
		}
		q := p
		for q < len(l.owner) && l.owner[q] == 0 {
			q++
		}
		g = append(g, [2]int{p, q - p})
		p = q
	}
	return g
}

// fits reports whether some free run holds n pages.
func (l *live[R]) fits(n int) bool {
	for _, g := range l.gaps() {
		if g[1] >= n {
			return true
		}
	}
	return false
}

// checkAccounting compares the allocator's accounting with the record.
func (l *live[R]) checkAccounting() error {
	got := l.a.Accounting()
	want := got
	want.Used = 0
	for _, s := range l.runs {
		want.Used += s.n
	}
	want.Free = len(l.owner) - want.Used
	want.Runs = len(l.runs)
	g := l.gaps()
	want.FreeRuns = len(g)
	want.LargestFree = 0
	for _, x := range g {
		want.LargestFree = max(want.LargestFree, x[1])
	}
	want.Allocs, want.Frees = l.allocs, l.frees
	if got != want {
		return fmt.Errorf("accounting %+v, want %+v", got, want)
	}
	return nil
}

func checkChurn[R comparable](newA func() (runAllocator[R], error)) error {
	return withLive(newA, func(l *live[R]) error {
		pages := len(l.owner)
		rng := rand.New(rand.NewPCG(1, 2))
		var handles []R
		for op := range 3000 {
			if len(handles) > 0 && rng.IntN(5) < 2 {
				i := rng.IntN(len(handles))
				if err := l.free(handles[i]); err != nil {
					return fmt.Errorf("op %d: %v", op, err)
				}
				handles[i] = handles[len(handles)-1]
				handles = handles[:len(handles)-1]
			} else {
				n := 1 + rng.IntN(pages/8)
				if rng.IntN(16) == 0 {
					n = 1 + rng.IntN(pages)
				}
				fits := l.fits(n)
				r, err := l.alloc(n)
				switch {
				case err == nil:
					handles = append(handles, r)
				case errors.Is(err, pool.ErrExhausted) && !fits:
				case errors.Is(err, pool.ErrExhausted):
					return fmt.Errorf("op %d: Alloc(%d) = %v, but a free run holds it (free runs %v)", op, n, err, l.gaps())
				default:
					return fmt.Errorf("op %d: %v", op, err)
				}
			}
			if err := l.checkAccounting(); err != nil {
				return fmt.Errorf("op %d: %v", op, err)
			}
		}
		for _, r := range handles {
			if err := l.free(r); err != nil {
				return err
			}
		}
		if err := l.checkAccounting(); err != nil {
			return fmt.Errorf("after freeing everything: %v", err)
		}
		return nil
	})
}

// rejected checks that err is a handle rejection.
func rejected(what string, err error) error {
	if !errors.Is(err, pool.ErrInvalidHandle) {
		return fmt.Errorf("%s = %v, want an error matching pool.ErrInvalidHandle", what, err)
	}
	return nil
}

func checkRejects[R comparable](newA func() (runAllocator[R], error)) error {
	a, err := newA()
	if err != nil {
		return err
	}
	defer a.Close()
	f, err := newA()
	if err != nil {
		return err
	}
	defer f.Close()
	l := newLive(a)
	keep, err := l.alloc(3)
	if err != nil {
		return err
	}
	old, err := l.alloc(4)
	if err != nil {
		return err
	}
	if err := l.free(old); err != nil {
		return err
	}
	reused, err := l.alloc(4) // likely the same pages, a new run
	if err != nil {
		return err
	}
	foreign, err := f.Alloc(4)
	if err != nil {
		return err
	}
	var zero R
	before := a.Accounting()
	for _, c := range []struct {
		what string
		r    R
	}{{"a freed run", old}, {"a run of another allocator", foreign}, {"the zero run", zero}} {
		if err := rejected("Free of "+c.what, a.Free(c.r)); err != nil {
			return err
		}
		if _, _, err := a.Span(c.r); rejected("Span of "+c.what, err) != nil {
			return rejected("Span of "+c.what, err)
		}
		if _, err := a.Bytes(c.r); rejected("Bytes of "+c.what, err) != nil {
			return rejected("Bytes of "+c.what, err)
		}
	}
	if after := a.Accounting(); after != before {
		return fmt.Errorf("rejected calls changed the accounting from %+v to %+v", before, after)
	}
	for _, r := range []R{keep, reused} {
		if err := l.checkBytes(r, l.runs[r]); err != nil {
			return fmt.Errorf("after the rejected calls: %v", err)
		}
	}
	if _, _, err := f.Span(foreign); err != nil {
		return fmt.Errorf("the foreign run died when another allocator was handed it: %v", err)
	}
	if err := l.free(reused); err != nil {
		return err
	}
	if err := rejected("a double Free", a.Free(reused)); err != nil {
		return err
	}
	if err := l.free(keep); err != nil {
		return err
	}
	return l.checkAccounting()
}

func checkMerge[R comparable](newA func() (runAllocator[R], error)) error {
	// Five runs fill the region; the three inner ones are freed in every
	// order, with the outer ones live, then all are freed.
	for _, order := range permutations([]int{1, 2, 3}) {
		if err := mergeOnce(newA, order); err != nil {
			return fmt.Errorf("freeing inner runs in order %v: %v", order, err)
		}
	}
	return nil
}

func mergeOnce[R comparable](newA func() (runAllocator[R], error), order []int) error {
	return withLive(newA, func(l *live[R]) error {
		pages := len(l.owner)
		sizes := []int{2, 3, 5, 7, pages - 17}
		runs := make([]R, len(sizes))
		for i, n := range sizes {
			var err error
			if runs[i], err = l.alloc(n); err != nil {
				return fmt.Errorf("filling the region: %v", err)
			}
		}
		if err := l.checkAccounting(); err != nil {
			return err
		}
		for _, i := range append(order, 0, 4) {
			if err := l.free(runs[i]); err != nil {
				return err
			}
			if err := l.checkAccounting(); err != nil {
				return fmt.Errorf("after freeing run %d: %v", i, err)
			}
		}
		whole, err := l.alloc(pages)
		if err != nil {
			return fmt.Errorf("one run of the whole region after freeing everything: %v", err)
		}
		return l.free(whole)
	})
}

func permutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}

func checkExhaustion[R comparable](newA func() (runAllocator[R], error)) error {
	return withLive(newA, func(l *live[R]) error {
		pages := len(l.owner)
		ones := make([]R, pages)
		for i := range ones {
			var err error
			if ones[i], err = l.alloc(1); err != nil {
				return fmt.Errorf("filling the region page by page: %v", err)
			}
		}
		before := l.a.Accounting()
		if _, err := l.a.Alloc(1); !errors.Is(err, pool.ErrExhausted) {
			return fmt.Errorf("Alloc(1) on a full region = %v, want pool.ErrExhausted", err)
		}
		if after := l.a.Accounting(); after != before {
			return fmt.Errorf("a refused allocation changed the accounting from %+v to %+v", before, after)
		}
		for i := 0; i < pages; i += 2 { // every other page free: half free, none contiguous
			if err := l.free(ones[i]); err != nil {
				return err
			}
		}
		if err := l.checkAccounting(); err != nil {
			return err
		}
		before = l.a.Accounting()
		if _, err := l.a.Alloc(2); !errors.Is(err, pool.ErrExhausted) {
			return fmt.Errorf("Alloc(2) with %d single free pages = %v, want pool.ErrExhausted", before.Free, err)
		}
		if after := l.a.Accounting(); after != before {
			return fmt.Errorf("a refused allocation changed the accounting from %+v to %+v", before, after)
		}
		return nil
	})
}

func checkArguments[R comparable](newA func() (runAllocator[R], error)) error {
	a, err := newA()
	if err != nil {
		return err
	}
	defer a.Close()
	before := a.Accounting()
	for _, n := range []int{0, -1, before.Pages + 1, int(^uint(0) >> 1)} {
		if _, err := a.Alloc(n); !errors.Is(err, pool.ErrInvalidArgument) {
			return fmt.Errorf("Alloc(%d) = %v, want pool.ErrInvalidArgument", n, err)
		}
	}
	if after := a.Accounting(); after != before {
		return fmt.Errorf("refused arguments changed the accounting from %+v to %+v", before, after)
	}
	return nil
}

func checkClosed[R comparable](newA func() (runAllocator[R], error)) error {
	a, err := newA()
	if err != nil {
		return err
	}
	r, err := a.Alloc(1)
	if err != nil {
		return err
	}
	if err := a.Close(); err != nil {
		return fmt.Errorf("Close: %v", err)
	}
	for what, err := range map[string]error{
		"Alloc": func() error { _, err := a.Alloc(1); return err }(),
		"Free":  a.Free(r),
		"Span":  func() error { _, _, err := a.Span(r); return err }(),
		"Bytes": func() error { _, err := a.Bytes(r); return err }(),
		"Close": a.Close(),
	} {
		if !errors.Is(err, pool.ErrClosed) {
			return fmt.Errorf("%s after Close = %v, want pool.ErrClosed", what, err)
		}
	}
	return nil
}
