package tier_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// removeAll removes ks and returns the count and the busy keys.
func removeAll(t *testing.T, m *tier.Manager, ks ...tier.Key) (int, []tier.Key) {
	t.Helper()
	n, busy, err := m.Remove(ks, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n, busy
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, m *tier.Manager)
	}{
		{"resident blocks leave at once", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 4))
			m.TakeEvents(nil)
			n, busy := removeAll(t, m, key(0), key(2))
			if n != 2 || len(busy) != 0 {
				t.Fatalf("removed %d, busy %v", n, busy)
			}
			if got := lookup(m, keys(0, 4)...); !slices.Equal(got, []tier.Result{tier.Miss, tier.Hit, tier.Miss, tier.Hit}) {
				t.Fatalf("lookups %v", got)
			}
			s := m.Stats()
			if s.Free != 6 || s.Evictable != 2 || s.Removed != 2 || s.Evictions != 0 {
				t.Fatalf("%+v", s)
			}
			ev := m.TakeEvents(nil)
			if len(ev) != 1 || ev[0].Kind != tier.BlockRemoved || ev[0].Medium != tier.MediumCPU || !slices.Equal(ev[0].Keys, []tier.Key{key(0), key(2)}) {
				t.Fatalf("events %+v", ev)
			}
		}},
		{"a block being stored is busy", func(t *testing.T, m *tier.Manager) {
			p, err := m.PrepareStore(keys(0, 2))
			if err != nil {
				t.Fatal(err)
			}
			n, busy := removeAll(t, m, key(0), key(1), key(5))
			if n != 0 || !slices.Equal(busy, keys(0, 2)) {
				t.Fatalf("removed %d, busy %v", n, busy)
			}
			if s := m.Stats(); s.StorePending != 2 || s.RemoveBusy != 2 {
				t.Fatalf("%+v", s)
			}
			if len(m.TakeEvents(nil)) != 0 {
				t.Fatal("a Remove that removed nothing recorded an event")
			}
			if err := m.CompleteStore(p.Job, true); err != nil {
				t.Fatal(err)
			}
			if n, busy := removeAll(t, m, keys(0, 2)...); n != 2 || len(busy) != 0 {
				t.Fatalf("after the store: removed %d, busy %v", n, busy)
			}
		}},
		{"a block pinned by a load is busy until its last load", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 2))
			a, _ := m.PrepareLoad(keys(0, 1))
			b, _ := m.PrepareLoad(keys(0, 1))
			n, busy := removeAll(t, m, key(0), key(1))
			if n != 1 || !slices.Equal(busy, keys(0, 1)) {
				t.Fatalf("removed %d, busy %v", n, busy)
			}
			if err := m.CompleteLoad(a.Job); err != nil {
				t.Fatal(err)
			}
			if _, busy := removeAll(t, m, key(0)); len(busy) != 1 {
				t.Fatal("removed under a second load's pin")
			}
			if err := m.CompleteLoad(b.Job); err != nil {
				t.Fatal(err)
			}
			if n, _ := removeAll(t, m, key(0)); n != 1 {
				t.Fatal("not removed once unpinned")
			}
		}},
		{"busy keys are appended to the caller's slice", func(t *testing.T, m *tier.Manager) {
			_, _ = m.PrepareStore(keys(0, 1))
			_, busy, err := m.Remove(keys(0, 1), []tier.Key{key(9)})
			if err != nil || !slices.Equal(busy, []tier.Key{key(9), key(0)}) {
				t.Fatalf("busy %v, %v", busy, err)
			}
		}},
		{"absent and repeated keys are ignored", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 1))
			m.TakeEvents(nil)
			n, busy := removeAll(t, m, key(5), key(0), key(5), key(0))
			if n != 1 || len(busy) != 0 {
				t.Fatalf("removed %d, busy %v", n, busy)
			}
			if ev := m.TakeEvents(nil); len(ev) != 1 || !slices.Equal(ev[0].Keys, keys(0, 1)) {
				t.Fatalf("events %+v", ev)
			}
			if n, _ := removeAll(t, m); n != 0 {
				t.Fatal("removed from no keys")
			}
		}},
		{"freed slots are used before evicting", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 8))
			removeAll(t, m, key(3), key(6))
			p := store(t, m, keys(10, 12))
			if len(p.Evicted) != 0 || !slices.ContainsFunc(p.Slots, func(s int) bool { return s == 3 || s == 6 }) {
				t.Fatalf("plan %+v", p)
			}
			if s := m.Stats(); s.Free != 0 || s.Evictions != 0 {
				t.Fatalf("%+v", s)
			}
		}},
		{"a removed key stored again serves the new bytes", func(t *testing.T, m *tier.Manager) {
			old := block(key(0))
			sp, _ := m.Store(keys(0, 1), [][]byte{old})
			drainUntil(t, m, map[tier.Job]bool{sp.Job: true})
			removeAll(t, m, key(0))
			fresh := bytes.Repeat([]byte{0xab}, bs)
			sp, _ = m.Store(keys(0, 1), [][]byte{fresh})
			drainUntil(t, m, map[tier.Job]bool{sp.Job: true})
			dst := [][]byte{make([]byte, bs)}
			j, err := m.Load(keys(0, 1), dst)
			if err != nil {
				t.Fatal(err)
			}
			if d := drainUntil(t, m, map[tier.Job]bool{j: true}); !d[0].OK || !bytes.Equal(dst[0], fresh) {
				t.Fatalf("load after remove and store: %+v", d[0])
			}
		}},
		{"copies in flight keep their blocks", func(t *testing.T, m *tier.Manager) {
			sp, err := m.Store(keys(0, 2), [][]byte{block(key(0)), block(key(1))})
			if err != nil {
				t.Fatal(err)
			}
			if _, busy := removeAll(t, m, keys(0, 2)...); len(busy) != 2 {
				t.Fatalf("a Store's blocks removed before its Drain: busy %v", busy)
			}
			drainUntil(t, m, map[tier.Job]bool{sp.Job: true})
			dst := [][]byte{make([]byte, bs)}
			lj, err := m.Load(keys(0, 1), dst)
			if err != nil {
				t.Fatal(err)
			}
			if _, busy := removeAll(t, m, keys(0, 2)...); len(busy) != 1 || busy[0] != key(0) {
				t.Fatalf("a Load's block removed before its Drain: busy %v", busy)
			}
			if d := drainUntil(t, m, map[tier.Job]bool{lj: true}); !d[0].OK || !bytes.Equal(dst[0], block(key(0))) {
				t.Fatalf("load: %+v", d[0])
			}
			if n, _ := removeAll(t, m, key(0)); n != 1 {
				t.Fatal("not removed after the load")
			}
		}},
		{"after reset the orphans are not removable and their jobs are stale", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 2))
			lp, _ := m.PrepareLoad(keys(0, 1))
			sp, _ := m.PrepareStore(keys(4, 5))
			if err := m.Reset(); err != nil {
				t.Fatal(err)
			}
			if n, busy := removeAll(t, m, key(0), key(1), key(4)); n != 0 || len(busy) != 0 {
				t.Fatalf("removed %d, busy %v of a reset tier", n, busy)
			}
			check(t, m)
			if err := m.CompleteLoad(lp.Job); !errors.Is(err, tier.ErrStaleJob) {
				t.Fatal(err)
			}
			if err := m.CompleteStore(sp.Job, true); !errors.Is(err, tier.ErrStaleJob) {
				t.Fatal(err)
			}
			if s := m.Stats(); s.Free != s.Capacity {
				t.Fatalf("%+v", s)
			}
		}},
		{"eviction after removal (s3fifo too) picks only resident blocks", func(t *testing.T, _ *tier.Manager) {
			for _, ev := range []func(int) tier.Eviction{tier.NewLRU, tier.NewS3FIFO} {
				m := newManager(t, 4, tier.WithEviction(ev))
				store(t, m, keys(0, 4))
				m.Touch(keys(0, 4))
				removeAll(t, m, key(0), key(2))
				p := store(t, m, keys(10, 14))
				if !slices.Equal(sorted(p.Evicted), sorted([]tier.Key{key(1), key(3)})) {
					t.Fatalf("evicted %v", p.Evicted)
				}
				check(t, m)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, 8)
			tc.run(t, m)
			check(t, m)
		})
	}
}

func sorted(ks []tier.Key) []tier.Key {
	ks = slices.Clone(ks)
	slices.SortFunc(ks, func(a, b tier.Key) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	return ks
}

func TestRemoveClosed(t *testing.T) {
	m := newManager(t, 8)
	store(t, m, keys(0, 1))
	_ = m.Close()
	if n, busy, err := m.Remove(keys(0, 1), nil); !errors.Is(err, pool.ErrClosed) || n != 0 || busy != nil {
		t.Fatalf("closed: %d %v %v", n, busy, err)
	}
	for _, z := range []*tier.Manager{nil, new(tier.Manager)} {
		if _, _, err := z.Remove(keys(0, 1), nil); !errors.Is(err, pool.ErrClosed) {
			t.Fatalf("%v: %v", z, err)
		}
	}
}

// TestRemoveAllocs: a Remove that removes nothing (absent or busy keys,
// within the busy slice's capacity) allocates nothing.
func TestRemoveAllocs(t *testing.T) {
	m := newManager(t, 8)
	_, _ = m.PrepareStore(keys(0, 2))
	ks := keys(0, 6)
	busy := make([]tier.Key, 0, 8)
	if a := testing.AllocsPerRun(100, func() { _, _, _ = m.Remove(ks, busy[:0]) }); a != 0 {
		t.Fatalf("%v allocs per Remove of absent and busy keys", a)
	}
}

// BenchmarkRemove times Remove of 8 resident blocks (the hand store that
// puts them back runs with the timer stopped) and of 8 absent keys.
func BenchmarkRemove(b *testing.B) {
	for _, how := range []string{"resident", "absent"} {
		b.Run(how, func(b *testing.B) {
			st, err := host.New(bs, 64, host.WithHeap())
			if err != nil {
				b.Fatal(err)
			}
			m, err := tier.New(st)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			ks, want := keys(0, 8), 8
			if how == "absent" {
				ks, want = keys(100, 108), 0
			}
			busy := make([]tier.Key, 0, 8)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				p, err := m.PrepareStore(keys(0, 8))
				if err != nil {
					b.Fatal(err)
				}
				_ = m.CompleteStore(p.Job, true)
				m.TakeEvents(nil)
				b.StartTimer()
				if n, _, _ := m.Remove(ks, busy[:0]); n != want {
					b.Fatalf("removed %d", n)
				}
			}
		})
	}
}
