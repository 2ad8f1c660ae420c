package model

import (
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPerm: Perm draws what (*rand.Rand).Perm draws.
func TestPerm(t *testing.T) {
	for n := range 40 {
		a, b := rand.New(rand.NewPCG(uint64(n), 1)), rand.New(rand.NewPCG(uint64(n), 1))
		if got, want := Perm(a, n), b.Perm(n); !slices.Equal(got, want) {
			t.Fatalf("Perm(%d) = %v, rand's %v", n, got, want)
		}
		if a.Uint64() != b.Uint64() {
			t.Fatalf("Perm(%d) took other draws than rand's", n)
		}
	}
}

// TestBelowTheEngine: the models import the standard library only.
func TestBelowTheEngine(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: the models sit below the engine and import the standard library only", name, path)
			}
		}
	}
}

// TestPoolSuiteMode: outside extended mode the pool decoder gives the
// suite's kinds only, and with one sender and no stale sends every live
// block is held by the owner or in flight.
func TestPoolSuiteMode(t *testing.T) {
	const n = 16
	m := NewPool[int](n, false)
	rng := rand.New(rand.NewPCG(3, 4))
	key := 0
	for step := range 3000 {
		switch op := m.Next(rng); op.Kind {
		case PoolAlloc:
			if m.Count() < n {
				key++
				m.Alloc(key, 0)
			}
		case PoolFree:
			m.Free(op.Slot)
		case PoolStale:
			m.Refused(1)
		case PoolSend:
			m.Send(m.Newest(op.N))
			m.Landed(len(m.InFlight) / 2)
		case PoolDrain:
			m.Landed(len(m.InFlight))
		case PoolBytes:
		default:
			t.Fatalf("step %d: kind %d outside extended mode", step, op.Kind)
		}
		if m.Count() != len(m.Live)+len(m.InFlight) || m.Allocs-m.Frees != uint64(m.Count()) || m.Unreported != 0 {
			t.Fatalf("step %d: %d live, %d held, %d in flight, %d allocs, %d frees, %d unreported",
				step, m.Count(), len(m.Live), len(m.InFlight), m.Allocs, m.Frees, m.Unreported)
		}
	}
}

// TestRegionInOrder: InOrder lists the live runs in the order they were
// added, as a list that appends on Add and removes on Drop would, whatever
// order Live is in, and leaves Live as it was.
func TestRegionInOrder(t *testing.T) {
	types := []Type{{Priority: 1}, {Priority: 0, Evictable: true}}
	m := NewRegion[int](32, false, types, 0.75, 0.5)
	rng := rand.New(rand.NewPCG(5, 6))
	var want []*Run[int] // the reference list
	drop := func(xs []*Run[int]) {
		for _, x := range xs {
			want = slices.DeleteFunc(want, func(y *Run[int]) bool { return y == x })
		}
	}
	key, shuffled := 0, 0
	for step := range 5000 {
		switch op := m.Next(rng); op.Kind {
		case RegionAlloc:
			room, placed := m.Evicting(op.N, op.C)
			drop(room)
			if placed {
				key++
				want = append(want, m.Add(key, m.Allowed(op.N)[0][0], op.N, op.C, 0))
				drop(m.Reclaim())
			}
		case RegionFree:
			m.Drop(op.Run, false)
			drop([]*Run[int]{op.Run})
		case RegionPin:
			op.Run.Pins++
		case RegionUnpin:
			if op.Run.Pins > 0 {
				m.Unpin(op.Run)
			}
		case RegionEvict:
			evicted, _ := m.Evict(op.N)
			drop(evicted)
		}
		live := slices.Clone(m.Live)
		if got := m.InOrder(); !slices.Equal(got, want) {
			t.Fatalf("step %d: InOrder = %v, want %v", step, got, want)
		}
		if !slices.Equal(m.Live, live) {
			t.Fatalf("step %d: InOrder changed Live", step)
		}
		if !slices.Equal(live, want) {
			shuffled++
		}
	}
	if shuffled == 0 || m.Evictions == 0 || m.Frees == 0 {
		t.Fatalf("the ops never shuffled Live (%d steps did), evicted (%d) or freed (%d)", shuffled, m.Evictions, m.Frees)
	}
	t.Logf("Live out of allocation order after %d steps; %d evictions, %d frees", shuffled, m.Evictions, m.Frees)
}
