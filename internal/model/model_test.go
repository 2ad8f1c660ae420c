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
