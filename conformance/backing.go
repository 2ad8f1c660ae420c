package conformance

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/locus-go/locus/pool"
)

// TestBacking runs the backing suite: every block has the same non-zero
// size with no spare capacity; blocks are zeroed (also in instances made
// after others were dirtied and closed, with others live), disjoint (within
// an instance and across several live instances, by address and by
// content) and stable over a hundred thousand calls; and Close returns nil,
// also after every byte was written, and may be called again. newB is called once per case, more
// often where a case needs several instances.
func TestBacking(t *testing.T, newB func(t *testing.T) pool.Backing) {
	t.Helper()
	backingSuite().runT(t, newB)
}

// CheckBacking runs the backing suite outside go test (it calls no testing
// function) and returns every violation found, joined with errors.Join.
func CheckBacking(newB func() (pool.Backing, error)) error {
	return backingSuite().runCheck(newB)
}

func backingSuite() suite[pool.Backing] {
	return suite[pool.Backing]{cases: backingCases, abort: func(pool.Backing) {}, release: func(b pool.Backing) { _ = b.Close() }}
}

type bkRun = run[pool.Backing]

var backingCases = []testCase[pool.Backing]{
	{name: "Geometry", run: checkGeometry, explanation: "a backing has at least one block, Len never changes, every block has the same non-zero length and no spare capacity"},
	{name: "Zeroed", run: checkZeroed, explanation: "a fresh backing's blocks read as zero, also one made after others were written all over and closed, while from none to several others are live"},
	{name: "Disjoint", run: checkDisjoint, explanation: "no two blocks share memory, within an instance or across live instances: their address ranges do not overlap and writing one block changes no other"},
	{name: "Stable", run: checkStable, explanation: "Block(i) returns the same memory, with what was written into it, on every call (a hundred thousand calls)"},
	{name: "CloseTwice", run: checkCloseTwice, explanation: "Close returns nil, also after every byte of every block was written, and may be called again without harm"},
}

func checkGeometry(r *bkRun) error {
	b := r.x
	n := b.Len()
	require(n > 0, ErrContract, "Len() = %d, want > 0", n)
	for i := range everyTime {
		if again := b.Len(); again != n {
			return violationf(ErrContract, "Len() call %d = %d, the first %d", i+2, again, n)
		}
	}
	size := len(b.Block(0))
	for i := range n {
		blk := b.Block(i)
		require(len(blk) != 0 && len(blk) == size, ErrContract, "block %d has %d bytes, block 0 has %d", i, len(blk), size)
		require(cap(blk) == len(blk), ErrAliased, "block %d has cap %d > len %d: an append would write into the next block", i, cap(blk), len(blk))
	}
	return nil
}

// allZero reports the first block of b with a non-zero byte.
func allZero(b pool.Backing) (blk, at int, ok bool) {
	for i := range b.Len() {
		for j, v := range b.Block(i) {
			if v != 0 {
				return i, j, false
			}
		}
	}
	return 0, 0, true
}

func checkZeroed(r *bkRun) error {
	if i, j, ok := allZero(r.x); !ok {
		return violationf(ErrContract, "block %d byte %d of a fresh backing is %#x, want 0", i, j, r.x.Block(i)[j])
	}
	dirty := func(b pool.Backing, v byte) {
		for i := range b.Len() {
			fill(b.Block(i), v)
		}
	}
	// Instances are made, written all over and closed in waves, with from
	// none to several others live at the time: a backing that recycles
	// memory must zero it again whatever else is live.
	dirty(r.x, 0xa5)
	live := []pool.Backing{r.x}
	made := 1
	for _, wave := range []struct{ keep, add int }{{1, 3}, {2, 2}, {0, 2}, {3, 3}, {1, 2}} {
		for len(live) > wave.keep {
			_ = live[len(live)-1].Close() // CloseTwice checks what Close returns
			live = live[:len(live)-1]
		}
		for range wave.add {
			b, err := r.another()
			must(err)
			made++
			if i, j, ok := allZero(b); !ok {
				return violationf(ErrContract, "block %d byte %d of instance %d, made while %d others were live and after others were written all over and closed, is %#x, want 0",
					i, j, made, len(live), b.Block(i)[j])
			}
			dirty(b, byte(made))
			live = append(live, b)
		}
	}
	return nil
}

func checkDisjoint(r *bkRun) error {
	insts, err := instances(r, liveInstances, func(b pool.Backing) (pool.Backing, error) { return b, nil })
	must(err)
	// By address: no two blocks' ranges overlap.
	type span struct {
		start, end uintptr
		inst, blk  int
	}
	var spans []span
	for k, b := range insts {
		for i := range b.Len() {
			blk := b.Block(i)
			if len(blk) == 0 {
				continue // Geometry reports it
			}
			start := reflect.ValueOf(blk).Pointer()
			spans = append(spans, span{start, start + uintptr(len(blk)), k, i})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		require(b.start >= a.end, ErrAliased, "block %d of instance %d and block %d of instance %d overlap in memory", a.blk, a.inst, b.blk, b.inst)
	}
	// By content: fill every block of every instance with its own random
	// bytes, then check them all; twice, with different bytes.
	var owners [][2]int
	for k, b := range insts {
		for i := range b.Len() {
			owners = append(owners, [2]int{k, i})
		}
	}
	blocks := func(bool) ([][]byte, error) {
		var bs [][]byte
		for _, o := range owners {
			bs = append(bs, insts[o[0]].Block(o[1]))
		}
		return bs, nil
	}
	return disjoint(1, 99, blocks, func(n, j int) error {
		return violationf(ErrAliased, "byte %d of block %d of instance %d was overwritten by a write to another block", j, owners[n][1], owners[n][0])
	})
}

func checkStable(r *bkRun) error {
	b := r.x
	n := b.Len()
	if n <= 0 {
		return skip("Len() = %d (see the Geometry case)", n)
	}
	first := make([]uintptr, n)
	lens := make([]int, n)
	for i := range n {
		blk := b.Block(i)
		first[i], lens[i] = reflect.ValueOf(blk).Pointer(), len(blk)
	}
	// Each call returns the first call's memory, and what is written
	// through one call is read through the next.
	rng := rand.New(rand.NewPCG(7, 7))
	for k := range max(everyTime, 3*n) {
		i := k % n
		if k >= 3*n {
			i = rng.IntN(n)
		}
		blk := b.Block(i)
		if reflect.ValueOf(blk).Pointer() != first[i] || len(blk) != lens[i] {
			return violationf(ErrContract, "call %d of Block(%d) returned other memory than the first call", k/n+2, i)
		}
		if len(blk) == 0 {
			continue
		}
		v := byte(k)
		blk[0], blk[len(blk)-1] = v, v
		if again := b.Block(i); len(again) != len(blk) || again[0] != v || again[len(again)-1] != v {
			return violationf(ErrContract, "what was written into block %d through one Block call was not there through the next", i)
		}
	}
	return nil
}

func checkCloseTwice(r *bkRun) error {
	// Every byte of every block is the user's: writing it all is no
	// reason for Close to fail.
	for i := range r.x.Len() {
		fill(r.x.Block(i), 0xff)
	}
	err := r.x.Close()
	require(err == nil, ErrContract, "Close = %v, want nil", err)
	_ = r.x.Close() // must not panic; an error is allowed
	return nil
}

// everyTime is how many calls a case makes of a method that must return
// the same on every call: enough that a component that changes its answer
// after tens of thousands of calls is caught.
const everyTime = 100_000

// liveInstances is how many instances from one constructor a case keeps
// live at once, so that instances sharing one of a few fixed resources are
// caught.
const liveInstances = 7

func fill(b []byte, v byte) {
	for j := range b {
		b[j] = v
	}
}

// check reports the first byte of b that is not v.
func check(b []byte, v byte) (int, bool) {
	for j, x := range b {
		if x != v {
			return j, false
		}
	}
	return 0, true
}
