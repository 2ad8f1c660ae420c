package tier_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

const bs = 256

func key(i int) tier.Key { return tier.KeyOf([]byte(fmt.Sprintf("block-%d", i)), 0) }

func keys(lo, hi int) []tier.Key {
	var ks []tier.Key
	for i := lo; i < hi; i++ {
		ks = append(ks, key(i))
	}
	return ks
}

func block(k tier.Key) []byte {
	b := make([]byte, bs)
	for i := range b {
		b[i] = k.Hash[i%16] ^ byte(i)
	}
	return b
}

// evictions are the package's eviction policies, by name.
var evictions = []struct {
	name string
	f    func(int) tier.Eviction
}{{"lru", tier.NewLRU}, {"s3fifo", tier.NewS3FIFO}}

func newManager(t *testing.T, slots int, opts ...tier.Option) *tier.Manager {
	t.Helper()
	return newManagerSized(t, bs, slots, opts...)
}

// newManagerSized is newManager over a heap host tier of blocks of size
// bytes.
func newManagerSized(t *testing.T, size, slots int, opts ...tier.Option) *tier.Manager {
	t.Helper()
	st, err := host.New(size, slots, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	m, err := tier.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func check(t *testing.T, m *tier.Manager) {
	t.Helper()
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	s := m.Stats()
	if s.Free+s.Evictable+s.StorePending+s.LoadPinned != s.Capacity {
		t.Fatalf("accounting: %+v", s)
	}
}

func lookup(m *tier.Manager, ks ...tier.Key) []tier.Result { return m.Lookup(ks, nil) }

// store stores ks by hand (PrepareStore, CompleteStore) and returns the plan.
func store(t *testing.T, m *tier.Manager, ks []tier.Key) tier.StorePlan {
	t.Helper()
	p, err := m.PrepareStore(ks)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CompleteStore(p.Job, true); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestContract(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, m *tier.Manager)
	}{
		{"lookup results", func(t *testing.T, m *tier.Manager) {
			p, err := m.PrepareStore(keys(0, 2))
			if err != nil {
				t.Fatal(err)
			}
			if got := lookup(m, key(0), key(5)); got[0] != tier.HitPending || got[1] != tier.Miss {
				t.Fatalf("pending store: %v", got)
			}
			if _, err := m.PrepareLoad(keys(0, 1)); !errors.Is(err, tier.ErrNotLoadable) {
				t.Fatalf("load of a pending block: %v", err)
			}
			if err := m.CompleteStore(p.Job, true); err != nil {
				t.Fatal(err)
			}
			if got := lookup(m, key(0), key(1)); got[0] != tier.Hit || got[1] != tier.Hit {
				t.Fatalf("stored: %v", got)
			}
		}},
		{"store skips present and duplicate keys", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 3))
			p, err := m.PrepareStore(append(keys(2, 5), key(4)))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Keys) != 2 || p.Skipped != 2 || p.Positions[0] != 1 {
				t.Fatalf("plan %+v", p)
			}
			_ = m.CompleteStore(p.Job, true)
		}},
		{"failed store drops the keys", func(t *testing.T, m *tier.Manager) {
			p, _ := m.PrepareStore(keys(0, 3))
			if err := m.CompleteStore(p.Job, false); err != nil {
				t.Fatal(err)
			}
			if got := lookup(m, key(0)); got[0] != tier.Miss {
				t.Fatalf("after failed store: %v", got)
			}
			if s := m.Stats(); s.Free != s.Capacity {
				t.Fatalf("%+v", s)
			}
		}},
		{"refusal evicts nothing", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 6))
			lp, err := m.PrepareLoad(keys(0, 4))
			if err != nil {
				t.Fatal(err)
			}
			// 8 slots: 2 free, 2 evictable, 4 pinned: 5 do not fit.
			if _, err := m.PrepareStore(keys(10, 15)); !errors.Is(err, tier.ErrNoSpace) {
				t.Fatalf("want ErrNoSpace, got %v", err)
			}
			if s := m.Stats(); s.Evictions != 0 || s.Refused != 1 {
				t.Fatalf("%+v", s)
			}
			p, err := m.PrepareStore(keys(10, 14))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Evicted) != 2 || p.Evicted[0] != key(4) {
				t.Fatalf("evicted %v", p.Evicted)
			}
			for _, k := range keys(0, 4) {
				if lookup(m, k)[0] != tier.Hit {
					t.Fatalf("pinned %v evicted", k)
				}
			}
			_ = m.CompleteStore(p.Job, true)
			_ = m.CompleteLoad(lp.Job)
		}},
		{"never evicts a key of the same call", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 8))
			p, err := m.PrepareStore(append(keys(0, 1), keys(20, 27)...)) // key 0 is the LRU victim
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range p.Evicted {
				if k == key(0) {
					t.Fatal("evicted a key of the call")
				}
			}
			_ = m.CompleteStore(p.Job, true)
		}},
		{"touch changes the victim", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 8))
			m.Touch(keys(0, 1))
			p := store(t, m, keys(20, 21))
			if p.Evicted[0] != key(1) {
				t.Fatalf("evicted %v, want key 1", p.Evicted)
			}
		}},
		{"jobs are generation-checked", func(t *testing.T, m *tier.Manager) {
			p, _ := m.PrepareStore(keys(0, 2))
			if err := m.CompleteLoad(p.Job); !errors.Is(err, tier.ErrInvalidJob) {
				t.Fatalf("store job completed as a load: %v", err)
			}
			_ = m.CompleteStore(p.Job, true)
			if err := m.CompleteStore(p.Job, true); !errors.Is(err, tier.ErrInvalidJob) {
				t.Fatalf("second completion: %v", err)
			}
			other := newManager(t, 8)
			op, _ := other.PrepareStore(keys(0, 1))
			if err := m.CompleteStore(op.Job, true); !errors.Is(err, tier.ErrInvalidJob) {
				t.Fatalf("foreign job: %v", err)
			}
			if err := m.CompleteLoad(tier.Job{}); !errors.Is(err, tier.ErrInvalidJob) {
				t.Fatalf("zero job: %v", err)
			}
		}},
		{"completion after reset is stale", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 2))
			lp, _ := m.PrepareLoad(keys(0, 1))
			sp, _ := m.PrepareStore(keys(5, 7))
			if err := m.Reset(); err != nil {
				t.Fatal(err)
			}
			if s := m.Stats(); s.StorePending != 2 || s.LoadPinned != 1 {
				t.Fatalf("slots of jobs in flight must stay reserved: %+v", s)
			}
			check(t, m)
			if err := m.CompleteStore(sp.Job, true); !errors.Is(err, tier.ErrStaleJob) {
				t.Fatalf("stale store: %v", err)
			}
			if err := m.CompleteLoad(lp.Job); !errors.Is(err, tier.ErrStaleJob) {
				t.Fatalf("stale load: %v", err)
			}
			if got := lookup(m, key(0), key(5)); got[0] != tier.Miss || got[1] != tier.Miss {
				t.Fatalf("after reset: %v", got)
			}
			if s := m.Stats(); s.Free != s.Capacity || s.StaleCompletions != 2 {
				t.Fatalf("%+v", s)
			}
		}},
		{"events carry the medium", func(t *testing.T, m *tier.Manager) {
			store(t, m, keys(0, 8))
			store(t, m, keys(8, 9))
			ev := m.TakeEvents(nil)
			if len(ev) != 3 || ev[0].Kind != tier.BlockStored || ev[1].Kind != tier.BlockRemoved || ev[1].Keys[0] != key(0) {
				t.Fatalf("events %+v", ev)
			}
			for _, e := range ev {
				if e.Medium != tier.MediumCPU {
					t.Fatalf("medium %q", e.Medium)
				}
			}
			if len(m.TakeEvents(nil)) != 0 {
				t.Fatal("events taken twice")
			}
		}},
		{"bad arguments", func(t *testing.T, m *tier.Manager) {
			if _, err := m.Store(keys(0, 2), [][]byte{block(key(0))}); !errors.Is(err, pool.ErrInvalidArgument) {
				t.Fatal(err)
			}
			if _, err := m.Load(keys(0, 1), [][]byte{make([]byte, 3)}); !errors.Is(err, pool.ErrInvalidArgument) {
				t.Fatal(err)
			}
			if _, err := m.PrepareLoad(nil); !errors.Is(err, pool.ErrInvalidArgument) {
				t.Fatal(err)
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

func TestAdmission(t *testing.T) {
	m := newManager(t, 8, tier.WithAdmission(tier.Admission{MinLookups: 2, MaxPerRequest: 3}))
	lookup(m, keys(0, 5)...)
	if p, _ := m.PrepareStore(keys(0, 5)); len(p.Keys) != 0 || p.NotAdmitted != 5 {
		t.Fatalf("after one lookup: %+v", p)
	}
	lookup(m, keys(0, 5)...)
	p, _ := m.PrepareStore(keys(0, 5))
	if len(p.Keys) != 3 || p.NotAdmitted != 2 {
		t.Fatalf("after two lookups, cap 3: %+v", p)
	}
	_ = m.CompleteStore(p.Job, true)
	check(t, m)
}

func TestNewRejects(t *testing.T) {
	st, _ := host.New(bs, 4, host.WithHeap())
	defer st.Close()
	for _, opts := range [][]tier.Option{
		{tier.WithWorkers(0)}, {tier.WithMaxJobs(-1)}, {tier.WithEviction(nil)},
		{tier.WithAdmission(tier.Admission{MinLookups: -1})},
	} {
		if _, err := tier.New(st, opts...); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("%v: %v", opts, err)
		}
	}
	if _, err := tier.New(nil); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Error(err)
	}
}

// drainUntil drains until the jobs are done.
func drainUntil(t *testing.T, m *tier.Manager, want map[tier.Job]bool) []tier.Done {
	t.Helper()
	var all []tier.Done
	for len(want) > 0 {
		done, err := m.Drain(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range done {
			if !want[d.Job] {
				t.Fatalf("unexpected completion %v", d.Job)
			}
			delete(want, d.Job)
		}
		all = append(all, done...)
	}
	return all
}

// TestCopiesRacingReads runs stores into slots while loads read other slots
// and the owner keeps looking the pending keys up, under -race over Go-heap
// memory: a load that read a slot under a store, or a dst read before its
// Drain, is a data race the detector reports; a key served before its store
// completed fails the content check.
func TestCopiesRacingReads(t *testing.T) {
	for _, ev := range evictions {
		t.Run(ev.name, func(t *testing.T) {
			m := newManager(t, 32, tier.WithWorkers(4), tier.WithEviction(ev.f))
			srcs := map[tier.Key][]byte{}
			for round := range 60 {
				ks := keys(round*4, round*4+4)
				var bufs [][]byte
				for _, k := range ks {
					srcs[k] = block(k)
					bufs = append(bufs, srcs[k])
				}
				sp, err := m.Store(ks, bufs)
				if err != nil {
					t.Fatal(err)
				}
				want := map[tier.Job]bool{sp.Job: true}
				// Load whatever earlier rounds left loadable, while the store runs.
				var lks []tier.Key
				for i := max(0, round-5) * 4; i < round*4; i++ {
					if r := lookup(m, key(i)); r[0] == tier.Hit {
						lks = append(lks, key(i))
					}
				}
				dsts := make([][]byte, len(lks))
				for i := range dsts {
					dsts[i] = make([]byte, bs)
				}
				var lj tier.Job
				if len(lks) > 0 {
					if lj, err = m.Load(lks, dsts); err != nil {
						t.Fatal(err)
					}
					want[lj] = true
				}
				for _, r := range lookup(m, ks...) {
					if r == tier.Hit {
						t.Fatal("a key is a HIT before its store's completion was drained")
					}
				}
				for _, d := range drainUntil(t, m, want) {
					if !d.OK {
						t.Fatalf("job %v failed: %v", d.Job, d.Err)
					}
				}
				for i, k := range lks {
					if !bytes.Equal(dsts[i], srcs[k]) {
						t.Fatalf("round %d: load of %v returned other bytes", round, k)
					}
				}
				check(t, m)
			}
			if s := m.Stats(); s.CopyConflicts != 0 || s.Evictions == 0 {
				t.Fatalf("%+v", s)
			}
		})
	}
}

// TestResetWhileCopying resets with copies in flight: their completions are
// stale and no slot of a running copy is given to a new block before its
// completion is drained.
func TestResetWhileCopying(t *testing.T) {
	m := newManager(t, 16, tier.WithWorkers(2))
	bufs := [][]byte{block(key(0)), block(key(1))}
	sp, err := m.Store(keys(0, 2), bufs)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	check(t, m)
	done := drainUntil(t, m, map[tier.Job]bool{sp.Job: true})
	if !errors.Is(done[0].Err, tier.ErrStaleJob) {
		t.Fatalf("stale copy: %+v", done[0])
	}
	if s := m.Stats(); s.Free != 16 {
		t.Fatalf("%+v", s)
	}
	check(t, m)
}
