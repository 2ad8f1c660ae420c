package pages_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// underTest adapts a *pages.Pool to the checks' runAllocator.
type underTest struct{ *pages.Pool }

func (p underTest) Alloc(n int) (pages.Run, error) { return p.Pool.Alloc(n, pages.DefaultContent) }

func (p underTest) Accounting() accounting {
	s := p.Stats()
	return accounting{PageSize: s.PageSize, Pages: s.Pages, Used: s.Used, Free: s.Free, LargestFree: s.LargestFree,
		FreeRuns: s.FreeRuns, Runs: s.Runs, Allocs: s.Allocs, Frees: s.Frees}
}

// TestContract runs the run-allocator checks over pages.Pool on each backing
// with each fit.
func TestContract(t *testing.T) {
	const pageSize, n = 64, 128
	backings := map[string]func() (pool.Backing, error){
		"heap": func() (pool.Backing, error) { return heap.New(pageSize*n, 1) },
		"mmap": func() (pool.Backing, error) { return mmap.New(pageSize*n, 1) },
	}
	for name, newB := range backings {
		for _, fit := range []pages.Fit{pages.BestFit, pages.FirstFit} {
			t.Run(fmt.Sprintf("backing=%s/fit=%v", name, fit), func(t *testing.T) {
				if _, err := newB(); errors.Is(err, errors.ErrUnsupported) {
					t.Skip(err)
				}
				err := checkRuns(func() (runAllocator[pages.Run], error) {
					b, err := newB()
					if err != nil {
						return nil, err
					}
					p, err := pages.New(b, pageSize, pages.WithFit(fit))
					if err != nil {
						return nil, err
					}
					return underTest{p}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestContractRejectsBroken feeds the checks deliberately broken allocators:
// each must be caught, by the case that names its flaw; the correct
// reference must pass.
func TestContractRejectsBroken(t *testing.T) {
	for _, c := range []struct {
		bug  string
		want []string // the cases that must report it
	}{
		{"", nil},
		{"no-merge", []string{"churn", "merge"}},
		{"no-generation", []string{"rejects"}},
		{"ignores-owner", []string{"rejects"}},
		{"overlap", []string{"churn"}},
		{"stale-used", []string{"churn", "merge"}},
		{"partial-refusal", []string{"exhaustion"}},
		{"alloc-zero", []string{"arguments"}},
		{"usable-after-close", []string{"closed"}},
	} {
		t.Run("bug="+c.bug, func(t *testing.T) {
			pools := 0
			err := checkRuns(func() (runAllocator[naiveRun], error) {
				pools++
				return newNaive(pools, 8, 96, c.bug), nil
			})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("the correct reference failed the checks: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("the checks passed an allocator with bug %q", c.bug)
			}
			for _, name := range c.want {
				if !strings.Contains(err.Error(), name+": ") {
					t.Errorf("case %q did not report bug %q; got:\n%v", name, c.bug, err)
				}
			}
		})
	}
}

// naive is an obviously correct run allocator, first fit over a sorted list
// of free runs, with switchable bugs for TestContractRejectsBroken.
type naive struct {
	id       int
	pageSize int
	pages    int
	bug      string
	mem      []byte
	free     [][2]int // (first, n), sorted by first
	runs     map[int][2]int
	gens     map[int]int // first page -> serial of the run that starts there
	serial   int
	closed   bool

	used          int
	allocs, frees uint64
}

type naiveRun struct{ pool, first, serial int }

func newNaive(id, pageSize, pages int, bug string) *naive {
	return &naive{id: id, pageSize: pageSize, pages: pages, bug: bug, mem: make([]byte, pageSize*pages),
		free: [][2]int{{0, pages}}, runs: map[int][2]int{}, gens: map[int]int{}}
}

func (a *naive) Alloc(n int) (naiveRun, error) {
	if a.closed && a.bug != "usable-after-close" {
		return naiveRun{}, pool.ErrClosed
	}
	if (n <= 0 && a.bug != "alloc-zero") || n > a.pages {
		return naiveRun{}, pool.ErrInvalidArgument
	}
	if n <= 0 {
		n = 1
	}
	for i, f := range a.free {
		if f[1] < n {
			continue
		}
		if f[1] == n {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = [2]int{f[0] + n, f[1] - n}
		}
		first := f[0]
		if a.bug == "overlap" && first > 0 {
			first-- // hands out the page before the free run, which a live run holds
		}
		a.serial++
		a.runs[a.serial] = [2]int{first, n}
		a.gens[first] = a.serial
		a.used += n
		a.allocs++
		return naiveRun{a.id, first, a.serial}, nil
	}
	if a.bug == "partial-refusal" {
		a.used++ // a refused allocation leaks into the accounting
	}
	return naiveRun{}, pool.ErrExhausted
}

// lookup validates r the way a generation check does.
func (a *naive) lookup(r naiveRun) ([2]int, error) {
	if a.closed && a.bug != "usable-after-close" {
		return [2]int{}, pool.ErrClosed
	}
	if r.pool != a.id && a.bug != "ignores-owner" {
		return [2]int{}, pool.ErrForeignHandle
	}
	if a.bug == "ignores-owner" && r.pool != a.id {
		if s, ok := a.gens[r.first]; ok { // takes the run at that page as its own
			return a.runs[s], nil
		}
	}
	s, ok := a.runs[r.serial]
	if !ok {
		if a.bug == "no-generation" && r.serial != 0 {
			return [2]int{r.first, 1}, nil // a stale run still resolves
		}
		return [2]int{}, pool.ErrStaleHandle
	}
	return s, nil
}

func (a *naive) Free(r naiveRun) error {
	s, err := a.lookup(r)
	if err != nil {
		return err
	}
	serial, ok := a.gens[s[0]]
	if !ok {
		return nil // a bug path: nothing live there
	}
	delete(a.runs, serial)
	delete(a.gens, s[0])
	if a.bug != "stale-used" {
		a.used -= s[1]
	}
	a.frees++
	a.insertFree(s[0], s[1])
	return nil
}

func (a *naive) insertFree(first, n int) {
	i := 0
	for i < len(a.free) && a.free[i][0] < first {
		i++
	}
	a.free = append(a.free[:i], append([][2]int{{first, n}}, a.free[i:]...)...)
	if a.bug == "no-merge" {
		return
	}
	if i+1 < len(a.free) && a.free[i][0]+a.free[i][1] == a.free[i+1][0] {
		a.free[i][1] += a.free[i+1][1]
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1][0]+a.free[i-1][1] == a.free[i][0] {
		a.free[i-1][1] += a.free[i][1]
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
}

func (a *naive) Span(r naiveRun) (int, int, error) {
	s, err := a.lookup(r)
	if err != nil {
		return 0, 0, err
	}
	return s[0], s[1], nil
}

func (a *naive) Bytes(r naiveRun) ([]byte, error) {
	s, err := a.lookup(r)
	if err != nil {
		return nil, err
	}
	lo, hi := s[0]*a.pageSize, (s[0]+s[1])*a.pageSize
	return a.mem[lo:hi:hi], nil
}

func (a *naive) Accounting() accounting {
	ac := accounting{PageSize: a.pageSize, Pages: a.pages, Used: a.used, Free: a.pages - a.used,
		FreeRuns: len(a.free), Runs: len(a.runs), Allocs: a.allocs, Frees: a.frees}
	for _, f := range a.free {
		ac.LargestFree = max(ac.LargestFree, f[1])
	}
	return ac
}

func (a *naive) Close() error {
	if a.closed && a.bug != "usable-after-close" {
		return pool.ErrClosed
	}
	a.closed = true
	return nil
}
