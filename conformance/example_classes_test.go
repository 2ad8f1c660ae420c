package conformance_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pages"
)

func ExampleCheckClasses() {
	err := conformance.CheckClasses(func() (*classes.DefaultPool, error) {
		return classes.Default([]classes.Class{{Size: 64, Blocks: 16}, {Size: 512, Blocks: 8}})
	})
	fmt.Println(err)
	// Output: <nil>
}

func ExampleCheckPages() {
	err := conformance.CheckPages(func(cfg conformance.PagesConfig) (*pages.Pool, error) {
		b, err := heap.New(64*64, 1) // one region of 64 pages of 64 bytes
		if err != nil {
			return nil, err
		}
		return pages.New(b, 64, append(cfg.Options(), pages.WithFit(pages.FirstFit))...)
	})
	fmt.Println(err)
	// Output: <nil>
}

// openPages is a page-run allocator whose Close closes nothing.
type openPages struct{ *pages.Pool }

func (openPages) Close() error { return nil }

// TestPagesViolationSaysWhere: a violation of the page-run suite matches
// its kind with errors.Is and names the line that called the suite; the
// size-class suite reports the same way.
func TestPagesViolationSaysWhere(t *testing.T) {
	newP := func(cfg conformance.PagesConfig) (openPages, error) {
		b, err := heap.New(64*64, 1)
		if err != nil {
			return openPages{}, err
		}
		p, err := pages.New(b, 64, cfg.Options()...)
		return openPages{p}, err
	}
	_, file, line, _ := runtime.Caller(0)
	err := conformance.CheckPages(newP)
	if !errors.Is(err, conformance.ErrContract) {
		t.Fatalf("CheckPages of an allocator that never closes = %v, want an error matching ErrContract", err)
	}
	cases := map[string]bool{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var v *conformance.Violation
		if !errors.As(e, &v) {
			t.Fatalf("%v is not a *conformance.Violation", e)
		}
		cases[v.Case] = true
		if want := fmt.Sprintf("%s:%d", file, line+1); v.Caller != want {
			t.Errorf("violation %s says the suite was called at %q, want %q", v.Case, v.Caller, want)
		}
	}
	// EvictFunc also catches it: Close inside an EvictFunc must fail.
	if !cases["Close"] || !cases["EvictFunc"] || len(cases) != 2 {
		t.Errorf("CheckPages of an allocator that never closes failed cases %v, want Close and EvictFunc", cases)
	}
}
