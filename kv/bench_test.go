package kv_test

import (
	"testing"
	"time"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

var algos = []kv.HashAlgo{kv.SHA256CBOR, kv.XXH3CBOR}

// vocab returns n token ids spread over a 128k vocabulary, as real prompts
// are (most ids need the 3- or 5-byte CBOR form).
func vocab(seed, n int) []uint32 {
	s := make([]uint32, n)
	x := uint32(seed)*2654435761 + 1
	for i := range s {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		s[i] = x % 128000
	}
	return s
}

func perBlock(b *testing.B, blocks int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blocks), "ns/block")
}

// benchManager returns a manager with opts over a pool of n blocks of 64
// bytes.
func benchManager(tb testing.TB, n int, opts ...kv.Option) *kv.Manager {
	tb.Helper()
	m, err := kv.New(newPool(tb, n, 64), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// perAlgo runs bench once per hash algorithm, as sub-benchmarks, over a
// manager of 256 blocks hashing with it.
func perAlgo(b *testing.B, bench func(b *testing.B, m *kv.Manager)) {
	for _, a := range algos {
		b.Run("algo="+a.String(), func(b *testing.B) { bench(b, benchManager(b, 256, kv.WithHash(a, ""))) })
	}
}

// cachedPrompt returns a prompt of 64 full blocks and one token more, its
// full blocks cached in m.
func cachedPrompt(m *kv.Manager) []uint32 {
	prompt := vocab(2, 64*16+1)
	id, _, _ := m.Admit(prompt, kv.Key{}) // fill the cache
	_ = m.Release(id)
	return prompt
}

// BenchmarkHash: the hash of one full block of 16 tokens.
func BenchmarkHash(b *testing.B) {
	for _, a := range algos {
		b.Run("algo="+a.String(), func(b *testing.B) {
			h, err := kv.NewHasher(a, "")
			if err != nil {
				b.Fatal(err)
			}
			tokens := vocab(1, 16)
			parent := h.Block(kv.Hash{}, tokens, kv.Key{})
			b.ReportAllocs()
			for b.Loop() {
				parent = h.Block(parent, tokens, kv.Key{})
			}
		})
	}
}

// BenchmarkAdmitPrefixHit: admission of a prompt whose first 64 blocks are
// cached (the 65th, holding the last token, is allocated), then release.
func BenchmarkAdmitPrefixHit(b *testing.B) {
	perAlgo(b, func(b *testing.B, m *kv.Manager) {
		prompt := cachedPrompt(m)
		op := func() {
			id, hit, err := m.Admit(prompt, kv.Key{})
			if err != nil || hit != 64*16 {
				b.Fatalf("admit: hit %d, %v", hit, err)
			}
			if err := m.Release(id); err != nil {
				b.Fatal(err)
			}
		}
		op()
		b.ReportAllocs()
		for b.Loop() {
			op()
		}
		perBlock(b, 64)
	})
}

// BenchmarkAdmitEvict: every admission of 16 new full blocks finds the pool
// full of cached blocks and must evict 16 of them.
func BenchmarkAdmitEvict(b *testing.B) {
	perAlgo(b, func(b *testing.B, m *kv.Manager) {
		prompt := vocab(3, 16*16)
		n := uint32(0)
		op := func() {
			n++
			prompt[0] = n // a new prompt every time
			id, _, err := m.Admit(prompt, kv.Key{})
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Release(id); err != nil {
				b.Fatal(err)
			}
		}
		for range 32 { // the whole pool cached
			op()
		}
		before := m.Stats().Evictions
		b.ReportAllocs()
		for b.Loop() {
			op()
		}
		if got := m.Stats().Evictions - before; got != uint64(16*b.N) {
			b.Fatalf("%d evictions in %d admissions", got, b.N)
		}
		perBlock(b, 16)
	})
}

// BenchmarkReleaseShared: release of a sequence whose 64 blocks another
// sequence shares (fork, then release the fork): only reference counts
// change.
func BenchmarkReleaseShared(b *testing.B) {
	m := benchManager(b, 128)
	base, _, err := m.Admit(vocab(4, 64*16), kv.Key{})
	if err != nil {
		b.Fatal(err)
	}
	warm, _ := m.Fork(base)
	_ = m.Release(warm)
	b.ReportAllocs()
	for b.Loop() {
		id, err := m.Fork(base)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Release(id); err != nil {
			b.Fatal(err)
		}
	}
	perBlock(b, 64)
}

// BenchmarkRemoteRelease: a worker releases a 64-block shared sequence with
// one push; the owner applies it at Drain.
func BenchmarkRemoteRelease(b *testing.B) {
	m := benchManager(b, 128)
	base, _, _ := m.Admit(vocab(5, 64*16), kv.Key{})
	r, _ := m.NewReleaser()
	warm, _ := m.Fork(base)
	_ = r.Release(warm)
	_, _ = m.Drain()
	b.ReportAllocs()
	for b.Loop() {
		id, _ := m.Fork(base)
		if err := r.Release(id); err != nil {
			b.Fatal(err)
		}
		if d, err := m.Drain(); d.Released != 1 || err != nil {
			b.Fatal(d, err)
		}
	}
	perBlock(b, 64)
}

// BenchmarkCanAdmit: the admission check of a prompt whose first 64
// blocks are cached, per block; it allocates nothing.
func BenchmarkCanAdmit(b *testing.B) {
	perAlgo(b, func(b *testing.B, m *kv.Manager) {
		prompt := cachedPrompt(m)
		b.ReportAllocs()
		for b.Loop() {
			if ad, err := m.CanAdmit(prompt, kv.Key{}); err != nil || ad.Status != kv.AdmitOK || ad.CachedTokens != 64*16 {
				b.Fatal(ad, err)
			}
		}
		perBlock(b, 64)
	})
}

// BenchmarkLookup: the cached prefix of a prompt of 64 cached blocks, per
// block.
func BenchmarkLookup(b *testing.B) {
	perAlgo(b, func(b *testing.B, m *kv.Manager) {
		prompt := cachedPrompt(m)
		b.ReportAllocs()
		for b.Loop() {
			if n, err := m.Lookup(prompt, kv.Key{}); err != nil || n != 64*16 {
				b.Fatal(n, err)
			}
		}
		perBlock(b, 64)
	})
}

// BenchmarkRollback: a speculative step of 64 draft tokens (4 blocks of
// 16) of which the target rejects all: Reserve, then Accept nothing, per
// rolled-back token. The blocks go back to the pool each time.
func BenchmarkRollback(b *testing.B) {
	const drafts = 64
	m := benchManager(b, 64)
	id, _, err := m.Admit(vocab(8, 100), kv.Key{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Reserve(id, drafts); err != nil {
			b.Fatal(err)
		}
		if err := m.Accept(id, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*drafts), "ns/token")
}

// BenchmarkChunkCall: what calling the pool through kv.BlockPool (an
// interface, as the manager does, once per chunk) costs against the
// concrete generic pool.
func BenchmarkChunkCall(b *testing.B) {
	p := newPool(b, 64, 64)
	chunk := make([]pool.Handle, 64)
	b.Run("call=concrete", func(b *testing.B) {
		for b.Loop() {
			_ = p.AllocChunk(chunk)
			_ = p.FreeChunk(chunk)
		}
		perBlock(b, 64)
	})
	b.Run("call=interface", func(b *testing.B) {
		var bp kv.BlockPool = p
		for b.Loop() {
			_ = bp.AllocChunk(chunk)
			_ = bp.FreeChunk(chunk)
		}
		perBlock(b, 64)
	})
}

// TestSteadyStateAllocatesNothing: once warm, the manager's paths allocate
// nothing, events with a subscriber included.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need warm runs")
	}
	events := 0
	now := time.Unix(0, 0)
	m, err := kv.New(newPool(t, 256, 64), kv.WithTokensPerBlock(16),
		kv.WithSubscriber(func(e *kv.Event) { events += len(e.Hashes) }),
		kv.WithClock(func() time.Time { return now }), kv.WithWatermarks(0.9, 0.8))
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.NewReleaser()
	if err != nil {
		t.Fatal(err)
	}
	system := vocab(6, 32*16)
	prompt := append(append([]uint32(nil), system...), vocab(7, 100)...)
	n := uint32(0)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	paths := map[string]func(){
		"admit hit, decode, release": func() {
			id, _, err := m.Admit(prompt, kv.Key{})
			must(err)
			for range 20 {
				must(m.Append(id, []uint32{1}))
			}
			must(m.Release(id))
		},
		"admit evicting": func() {
			n++
			prompt[len(prompt)-50] = n
			id, _, err := m.Admit(prompt[len(prompt)-64:], kv.Key{Salt: "x"})
			must(err)
			must(m.Release(id))
		},
		"fork, copy-on-write, release": func() {
			id, _, err := m.Admit(prompt, kv.Key{})
			must(err)
			f, err := m.Fork(id)
			must(err)
			must(m.Append(f, []uint32{2, 3}))
			must(m.Append(id, []uint32{4}))
			must(m.Release(f))
			must(m.Release(id))
		},
		"remote release and drain": func() {
			id, _, err := m.Admit(prompt, kv.Key{})
			must(err)
			must(r.Release(id))
			_, err = m.Drain()
			must(err)
		},
		"can admit, lookup": func() {
			_, err := m.CanAdmit(prompt, kv.Key{})
			must(err)
			_, err = m.Lookup(prompt, kv.Key{})
			must(err)
		},
		"reserve, accept, roll back": func() {
			id, _, err := m.Admit(prompt, kv.Key{})
			must(err)
			for k := range 4 {
				must(m.Reserve(id, 40))
				must(m.Accept(id, prompt[:k*10]))
			}
			must(m.Release(id))
		},
		"preempt and readmit": func() {
			id, _, err := m.Admit(prompt, kv.Key{})
			must(err)
			must(m.Append(id, prompt[:40]))
			_, err = m.Preempt(id)
			must(err)
			id, _, err = m.Admit(prompt, kv.Key{})
			must(err)
			must(m.Release(id))
		},
		"pin, priority, decay, reset": func() {
			_, err := m.Pin(system, kv.Key{})
			must(err)
			id, _, err := m.Admit(prompt, kv.Key{})
			must(err)
			must(m.SetPriority(id, 0, 64, 60, time.Second))
			must(m.Release(id))
			_, err = m.Unpin(system, kv.Key{})
			must(err)
			now = now.Add(2 * time.Second)
			_, err = m.Drain()
			must(err)
			_, err = m.Reset()
			must(err)
		},
	}
	for name, op := range paths {
		for range 300 { // warm: fill the cache, grow every scratch slice
			op()
		}
		if a := testing.AllocsPerRun(100, op); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, a)
		}
	}
	if events == 0 {
		t.Fatal("no events were delivered")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}
