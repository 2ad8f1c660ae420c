package fleet_test

import (
	"testing"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/transport/mailbox"
)

// newManager returns a kv.Manager of 16 blocks of 4 tokens (XXH3CBOR,
// seed "seed") with a write-through host tier of 64 blocks, and sub as
// its subscriber when not nil.
func newManager(t *testing.T, sub func(*kv.Event)) *kv.Manager {
	t.Helper()
	b, err := heap.New(4096, 16)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	st, err := host.New(4096, 64, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.New(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	opts := []kv.Option{kv.WithTokensPerBlock(4), kv.WithHash(kv.XXH3CBOR, "seed"), kv.WithTiers(h)}
	if sub != nil {
		opts = append(opts, kv.WithSubscriber(sub))
	}
	m, err := kv.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func settle(t *testing.T, m *kv.Manager) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := m.Drain(); err != nil {
			t.Fatal(err)
		}
		if m.Stats().InFlight == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("copies still in flight")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIndexFromManager feeds a kv.Manager's own events to the Index: its
// prompt scores at the GPU weight once cached, keeps its GPU weight after
// the host tier's stores (best medium), and scores at the CPU weight once
// the hot pool evicted it, with its BlockRemoved for the hot pool only.
func TestIndexFromManager(t *testing.T) {
	x := newIndex(t)
	s := newScorer(t, x)
	m := newManager(t, x.Subscriber("engine-0"))
	h, err := fleet.NewHasher(kv.XXH3CBOR, "seed", 4)
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(base uint32) []uint32 {
		p := make([]uint32, 4*4+1)
		for i := range p {
			p[i] = base + uint32(i)
		}
		return p
	}
	first := prompt(0)
	hashes := h.Append(nil, first, kv.Key{})
	id, _, err := m.Admit(first, kv.Key{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Score(hashes)["engine-0"]; got != 4 {
		t.Fatalf("after admission: score %v, want 4 (4 blocks at gpu 1.0)", got)
	}
	if err := m.Release(id); err != nil {
		t.Fatal(err)
	}
	settle(t, m)
	if got := x.Entries(nil, hashes[0]); len(got) != 2 {
		t.Fatalf("entries %v, want gpu and cpu", got)
	}
	if got := s.Score(hashes)["engine-0"]; got != 4 {
		t.Fatalf("after the host stores: score %v, want 4", got)
	}
	// Other prompts take the whole pool: the first prompt's blocks are
	// evicted from the hot pool and stay in the host tier.
	for base := uint32(1000); base < 8000; base += 1000 {
		id, _, err := m.Admit(prompt(base), kv.Key{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Release(id); err != nil {
			t.Fatal(err)
		}
		settle(t, m)
	}
	if got, want := s.Score(hashes)["engine-0"], 0.8*4; got != sum(0.8, 0.8, 0.8, 0.8) {
		t.Fatalf("after the hot pool's eviction: score %v, want %v (cpu 0.8)", got, want)
	}
	// Reset empties the hot pool's cache; the host tier keeps its copies,
	// so the manager sends BlockRemoved for the hot pool, not the
	// pod-wide AllBlocksCleared, and the prompt still scores at cpu.
	if _, err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if got := s.Score(hashes)["engine-0"]; got != sum(0.8, 0.8, 0.8, 0.8) {
		t.Fatalf("after Reset with the host tier's copies in place: score %v, want %v", got, 0.8*4)
	}
}

func TestRouterPick(t *testing.T) {
	hs := universe(t, 4)
	stored := func(x *fleet.Index, pod, medium string, blocks ...kv.Hash) {
		if err := x.Apply(pod, &kv.Event{Kind: kv.BlockStored, Hashes: blocks, Tokens: make([]uint32, len(blocks)), BlockSize: 1, Medium: medium}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		policy fleet.Policy
		setup  func(*fleet.Index)
		busy   []int // picks made (and not done) before, by pod index
		want   []string
	}{
		{"round-robin ignores the index", fleet.RoundRobin, func(x *fleet.Index) { stored(x, "b", "", hs[:3]...) }, nil,
			[]string{"a", "b", "c", "a"}},
		{"best score wins", fleet.KVAware, func(x *fleet.Index) { stored(x, "a", "", hs[0]); stored(x, "c", "", hs[:3]...) }, nil,
			[]string{"c", "c"}},
		{"gpu beats cpu", fleet.KVAware, func(x *fleet.Index) { stored(x, "a", "CPU", hs[:3]...); stored(x, "b", "", hs[:3]...) }, nil,
			[]string{"b"}},
		{"ties go to the least loaded", fleet.KVAware, func(x *fleet.Index) { stored(x, "a", "", hs[:3]...); stored(x, "b", "", hs[:3]...) },
			[]int{0}, []string{"b", "a", "b"}},
		{"no score: least loaded, then first", fleet.KVAware, func(*fleet.Index) {}, nil, []string{"a", "b", "c", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex(t)
			tc.setup(x)
			s := newScorer(t, x)
			r, err := fleet.NewRouter(s, []string{"a", "b", "c"}, tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range tc.busy {
				if d := r.Pick(nil); d.Index != i {
					t.Fatalf("setup picked %d, want %d", d.Index, i)
				}
			}
			var got []string
			for range tc.want {
				got = append(got, r.Pick(hs[:3]).Pod)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("picked %v, want %v", got, tc.want)
				}
			}
		})
	}
}
