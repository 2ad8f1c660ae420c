package roster

import (
	"slices"
	"sync"
	"testing"
)

func TestAddCompact(t *testing.T) {
	var l List[int]
	if l.Load() != nil {
		t.Fatal("zero List not empty")
	}
	for i := range 10 {
		l.Add(i)
	}
	if got := l.Load(); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("Load = %v", got)
	}
	l.Compact(func(x int) bool { return x%3 == 0 })
	if got := l.Load(); !slices.Equal(got, []int{1, 2, 4, 5, 7, 8}) {
		t.Fatalf("after Compact, Load = %v", got)
	}
	l.Add(10)
	if got := l.Load(); !slices.Equal(got, []int{1, 2, 4, 5, 7, 8, 10}) {
		t.Fatalf("Add after Compact: %v", got)
	}
	if a := testing.AllocsPerRun(100, func() {
		l.Add(1)
		l.Compact(func(x int) bool { return x == 1 })
		l.Add(1)
	}); a != 0 {
		t.Fatalf("Add and Compact below capacity allocate %v times", a)
	}
}

// The owner reads and compacts while other goroutines add under the lock;
// run with -race.
func TestOwnerReadsWhileOthersAdd(t *testing.T) {
	var l List[*int]
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				v := g*1000 + i
				mu.Lock()
				l.Add(&v)
				mu.Unlock()
			}
		})
	}
	for range 200 {
		for _, p := range l.Load() {
			if p == nil {
				t.Fatal("a published slot is empty")
			}
		}
		mu.Lock()
		l.Compact(func(p *int) bool { return *p%2 == 0 })
		mu.Unlock()
	}
	wg.Wait()
	l.Compact(func(p *int) bool { return *p%2 == 0 })
	for _, p := range l.Load() {
		if *p%2 == 0 {
			t.Fatalf("%d survived Compact", *p)
		}
	}
	if n := len(l.Load()); n != 1000 {
		t.Fatalf("%d odd values left, want 1000", n)
	}
}
