package tier_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// direct records the Manager's DirectStorage calls over a host tier and
// fails them on demand.
type direct struct {
	*host.Tier
	calls            []string
	failInv, failCom bool
}

var errMedium = errors.New("medium gone")

func (d *direct) Invalidate(slot int) error {
	d.calls = append(d.calls, "invalidate")
	if d.failInv {
		return errMedium
	}
	return d.Tier.Invalidate(slot)
}

func (d *direct) Commit(slot int, k tier.Key, gen uint64) error {
	d.calls = append(d.calls, "commit")
	if d.failCom {
		return errMedium
	}
	return d.Tier.Commit(slot, k, gen)
}

// An engine's own writes: PrepareStore invalidates every planned slot and
// CompleteStore(ok) commits every stored one, after which the Manager's
// Load serves what the engine wrote; a failed store commits nothing; a
// failed Invalidate fails PrepareStore, leaving nothing prepared; a failed
// Commit drops the keys; Store (the workers' copies) calls neither.
func TestDirectStorage(t *testing.T) {
	st, err := host.New(bs, 4, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	d := &direct{Tier: st}
	m, err := tier.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := func(what string, calls ...string) {
		t.Helper()
		if len(d.calls) != len(calls) {
			t.Fatalf("%s: calls %v, want %v", what, d.calls, calls)
		}
		for i := range calls {
			if d.calls[i] != calls[i] {
				t.Fatalf("%s: calls %v, want %v", what, d.calls, calls)
			}
		}
		d.calls = d.calls[:0]
	}

	plan, err := m.PrepareStore(keys(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	want("PrepareStore", "invalidate", "invalidate")
	for i, s := range plan.Slots {
		copy(st.Slot(s), block(plan.Keys[i]))
	}
	if err := m.CompleteStore(plan.Job, true); err != nil {
		t.Fatal(err)
	}
	want("CompleteStore", "commit", "commit")
	dsts := [][]byte{make([]byte, bs), make([]byte, bs)}
	lj, err := m.Load(keys(0, 2), dsts)
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, drainUntil(t, m, map[tier.Job]bool{lj: true}))
	for i := range dsts {
		if !bytes.Equal(dsts[i], block(key(i))) {
			t.Fatalf("block %d: the Load does not serve what the engine wrote", i)
		}
	}

	plan, _ = m.PrepareStore(keys(2, 3))
	if err := m.CompleteStore(plan.Job, false); err != nil {
		t.Fatal(err)
	}
	want("a failed store", "invalidate")

	d.failInv = true
	if _, err := m.PrepareStore(keys(3, 4)); !errors.Is(err, errMedium) {
		t.Fatalf("PrepareStore with Invalidate failing: %v", err)
	}
	d.failInv = false
	want("a failed Invalidate", "invalidate")
	if r := m.Lookup(keys(3, 4), nil); r[0] != tier.Miss {
		t.Fatalf("after a failed PrepareStore the key looks up as %v", r[0])
	}

	plan, _ = m.PrepareStore(keys(4, 5))
	d.failCom = true
	if err := m.CompleteStore(plan.Job, true); err != nil {
		t.Fatal(err)
	}
	d.failCom = false
	want("a failed Commit", "invalidate", "commit")
	if r := m.Lookup(keys(4, 5), nil); r[0] != tier.Miss {
		t.Fatalf("a store whose Commit failed looks up as %v", r[0])
	}

	sp, err := m.Store(keys(5, 6), [][]byte{block(key(5))})
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, drainUntil(t, m, map[tier.Job]bool{sp.Job: true}))
	want("Store")
}

// wantOK fails the test unless every job in done went well.
func wantOK(t *testing.T, done []tier.Done) {
	t.Helper()
	for _, d := range done {
		if !d.OK {
			t.Fatalf("job %+v failed", d)
		}
	}
}
