package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
)

// recorder is a subscriber that keeps a copy of every event.
type recorder struct{ evs []kv.Event }

func (r *recorder) subscribe(ev *kv.Event) {
	c := *ev
	c.Hashes = append([]kv.Hash(nil), ev.Hashes...)
	if ev.Tokens != nil {
		c.Tokens = append([]uint32{}, ev.Tokens...)
	}
	r.evs = append(r.evs, c)
}

// take returns the events recorded since the last call.
func (r *recorder) take() []kv.Event {
	evs := r.evs
	r.evs = nil
	return evs
}

// on returns the events of medium (the hot pool's: "").
func on(evs []kv.Event, medium string) []kv.Event {
	var out []kv.Event
	for _, ev := range evs {
		if ev.Medium == medium {
			out = append(out, ev)
		}
	}
	return out
}

// as returns ev with medium.
func as(ev kv.Event, medium string) kv.Event {
	ev.Medium = medium
	return ev
}

// TestTierEventsWriteThrough: a block written through to the host tier is
// announced a second time, with medium CPU, by an event equal to the hot
// pool's in every other field (hashes, parent, tokens, block size, key),
// once its store completes; blocks of two sequences stored together give
// one event per chain.
func TestTierEventsWriteThrough(t *testing.T) {
	rec := &recorder{}
	m, e, _, _ := hostEngine(t, kv.WithSubscriber(rec.subscribe))
	key := kv.Key{Adapter: "lora-a", Salt: "tenant-1"}
	a := prompt(0, 3)

	id, _, err := m.Admit(a, key)
	require.NoError(t, err)
	e.run(id, a, key)
	gpu := rec.take()
	require.Len(t, gpu, 1)
	hs := e.chain(a, key)
	require.Equal(t, kv.Event{Kind: kv.BlockStored, Hashes: hs, Tokens: a[:48], BlockSize: 16, Key: key}, gpu[0])

	settle(t, m)
	require.Equal(t, []kv.Event{as(gpu[0], "CPU")}, rec.take(), "the CPU event describes the blocks as the GPU event does")

	// A block appended to the chain has a parent; a second sequence
	// stored in the same batch gets an event of its own.
	require.NoError(t, m.Append(id, span(1000, 1015)))
	b := prompt(5000, 2)
	id2, _, err := m.Admit(b, kv.Key{})
	require.NoError(t, err)
	e.run(id2, b, kv.Key{})
	gpu = rec.take()
	require.Len(t, gpu, 2)
	require.Equal(t, hs[2], gpu[0].Parent)
	require.Equal(t, cat(a[48:], span(1000, 1015)), gpu[0].Tokens)
	require.True(t, gpu[1].Parent.IsZero())
	settle(t, m)
	require.Equal(t, []kv.Event{as(gpu[0], "CPU"), as(gpu[1], "CPU")}, rec.take())
	require.NoError(t, m.Release(id))
	require.NoError(t, m.Release(id2))
	settle(t, m)
	require.Empty(t, rec.take(), "releasing cached blocks emits nothing")
	require.Equal(t, uint64(6), identity(t, m).Tiers[0].StoredBlocks)
}

// TestTierEventsEviction: a host tier that evicts blocks to store others
// emits BlockRemoved with medium CPU and their hashes; a disk tier behind
// it keeps them (medium DISK), and a block loaded back from disk and
// written through to the host tier is announced in full again.
func TestTierEventsEviction(t *testing.T) {
	rec := &recorder{}
	h, _ := hostTier(t, 4)
	d := diskTier(t, 64)
	m, p := tiered(t, 16, []kv.Tier{h, d}, kv.WithSubscriber(rec.subscribe))
	e := newEngine(t, m, p)
	a, b := prompt(0, 4), prompt(1000, 4)
	var gpuA kv.Event
	for i, tokens := range [][]uint32{a, b} {
		e.serve(tokens, kv.Key{})
		gpu := rec.take()
		require.Len(t, gpu, 1)
		settle(t, m)
		// Each tier's events come in order; the two tiers' stores complete
		// in whichever order their copies finish.
		evs := rec.take()
		cpu := on(evs, "CPU")
		require.Len(t, evs, len(cpu)+1, "only host and disk events")
		require.Equal(t, []kv.Event{as(gpu[0], "DISK")}, on(evs, "DISK"))
		if i == 0 {
			gpuA = gpu[0]
			require.Equal(t, []kv.Event{as(gpu[0], "CPU")}, cpu)
			continue
		}
		// b's store evicted a from the host tier first.
		require.Len(t, cpu, 2)
		require.Equal(t, kv.BlockRemoved, cpu[0].Kind)
		require.ElementsMatch(t, e.chain(a, kv.Key{}), cpu[0].Hashes)
		require.Equal(t, as(gpu[0], "CPU"), cpu[1])
	}
	require.Equal(t, uint64(4), h.Stats().Evictions)

	// a from the disk tier, back into the host tier (evicting b).
	reset(t, m)
	rec.take()
	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	settle(t, m) // loads, then writes the loaded blocks through
	e.run(id, a, kv.Key{})
	evs := rec.take()
	require.Len(t, evs, 3)
	require.Equal(t, gpuA, evs[0], "loaded blocks are announced as computed ones")
	require.Equal(t, kv.BlockRemoved, evs[1].Kind)
	require.Equal(t, "CPU", evs[1].Medium)
	require.ElementsMatch(t, e.chain(b, kv.Key{}), evs[1].Hashes)
	require.Equal(t, as(gpuA, "CPU"), evs[2], "tokens kept from the load")
	require.NoError(t, m.Release(id))
}

// TestTierEventsReset: a tier's Reset is announced as the BlockRemoved of
// every block it held, at the next Drain; a store in flight at the reset
// is announced neither stored nor removed.
func TestTierEventsReset(t *testing.T) {
	rec := &recorder{}
	m, e, h, f := hostEngine(t, kv.WithSubscriber(rec.subscribe))
	a, b := prompt(0, 4), prompt(1000, 2)
	e.serve(a, kv.Key{})
	settle(t, m)
	require.Len(t, on(rec.take(), "CPU"), 1)

	e.serve(b, kv.Key{})
	f.gate.Lock()
	_, err := m.Drain() // b's store waits at the gate
	require.NoError(t, err)
	require.NoError(t, h.Reset())
	f.gate.Unlock()
	settle(t, m)
	evs := on(rec.take(), "CPU")
	require.Len(t, evs, 1, "a's removal; nothing of b's stale store")
	require.Equal(t, kv.BlockRemoved, evs[0].Kind)
	require.ElementsMatch(t, e.chain(a, kv.Key{}), evs[0].Hashes)
	require.Equal(t, uint64(1), identity(t, m).Tiers[0].StoreFailures)
}

// TestTierEventsFailedStore: a store that fails is not announced.
func TestTierEventsFailedStore(t *testing.T) {
	rec := &recorder{}
	m, e, h, f := hostEngine(t, kv.WithSubscriber(rec.subscribe))
	a := prompt(0, 4)
	f.failWrites.Store(true)
	e.serve(a, kv.Key{})
	settle(t, m)
	evs := rec.take()
	require.Len(t, evs, 1)
	require.Equal(t, "", evs[0].Medium, "the hot pool's BlockStored only")
	require.Equal(t, uint64(1), identity(t, m).Tiers[0].StoreFailures)
	require.Equal(t, 32, h.Stats().Free)
}

// TestTierEventsWriteBack: a block stored by write-back, whose tokens the
// manager no longer has, is announced as vLLM's offload placeholder: its
// hash, no parent, no tokens, before the hot pool's removal.
func TestTierEventsWriteBack(t *testing.T) {
	rec := &recorder{}
	m, e, _, _ := hostEngine(t, kv.WithDemotion(kv.WriteBack), kv.WithWatermarks(0.75, 0.25), kv.WithSubscriber(rec.subscribe))
	var all []kv.Hash
	for v := range 3 {
		a := prompt(uint32(v*1000), 4)
		all = append(all, e.chain(a, kv.Key{})...)
		e.serve(a, kv.Key{})
	}
	rec.take()
	settle(t, m)
	evs := rec.take()
	require.Len(t, evs, 2)
	require.Equal(t, "CPU", evs[0].Medium)
	require.Equal(t, kv.BlockStored, evs[0].Kind)
	require.Len(t, evs[0].Hashes, 8)
	require.Subset(t, all, evs[0].Hashes)
	require.True(t, evs[0].Parent.IsZero())
	require.Empty(t, evs[0].Tokens)
	require.Equal(t, 16, evs[0].BlockSize)
	require.Equal(t, kv.Event{Kind: kv.BlockRemoved, Hashes: evs[0].Hashes, BlockSize: 16}, evs[1],
		"the hot pool drops them after the host tier has them")
}

// TestTierEventsWithoutSubscriber: without a subscriber the manager leaves
// the tier's events to the engine.
func TestTierEventsWithoutSubscriber(t *testing.T) {
	m, e, h, _ := hostEngine(t)
	a := prompt(0, 2)
	e.serve(a, kv.Key{})
	settle(t, m)
	evs := h.TakeEvents(nil)
	require.Len(t, evs, 1)
	require.Len(t, evs[0].Keys, 2)
}

// TestTierEventsResetKeepsTiers: a Reset that empties the hot pool while
// a tier keeps the blocks announces their removal from the hot pool's
// medium only (BlockRemoved), never AllBlocksCleared, which a router takes
// as every medium of the engine emptied; once no tier keeps anything, a
// Reset that empties the pool announces AllBlocksCleared again.
func TestTierEventsResetKeepsTiers(t *testing.T) {
	rec := &recorder{}
	m, e, h, _ := hostEngine(t, kv.WithSubscriber(rec.subscribe))
	a := prompt(0, 4)
	e.serve(a, kv.Key{})
	settle(t, m)
	rec.take()

	n, err := m.Reset()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, []kv.Event{{Kind: kv.BlockRemoved, Hashes: e.chain(a, kv.Key{}), BlockSize: 16}}, rec.take(),
		"the host tier keeps the blocks: a removal from the hot pool, not AllBlocksCleared")
	require.Equal(t, 4, h.Stats().Evictable)

	// The tier emptied, a Reset that empties the pool clears every medium.
	id, _, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	settle(t, m)
	e.run(id, a, kv.Key{})
	require.NoError(t, m.Release(id))
	settle(t, m)
	require.NoError(t, h.Reset())
	settle(t, m)
	rec.take()
	reset(t, m)
	require.Equal(t, []kv.EventKind{kv.AllBlocksCleared}, kinds(rec.take()))
}

// TestTierEventsResetClosedTier: a closed tier keeps nothing the manager
// serves, so it does not hold back AllBlocksCleared.
func TestTierEventsResetClosedTier(t *testing.T) {
	rec := &recorder{}
	m, e, h, _ := hostEngine(t, kv.WithSubscriber(rec.subscribe))
	a := prompt(0, 2)
	e.serve(a, kv.Key{})
	settle(t, m)
	require.NoError(t, h.Close())
	_, err := m.Drain() // kv abandons the closed tier
	require.NoError(t, err)
	rec.take()
	reset(t, m)
	require.Equal(t, []kv.EventKind{kv.AllBlocksCleared}, kinds(rec.take()))
}

func kinds(evs []kv.Event) []kv.EventKind {
	var out []kv.EventKind
	for _, ev := range evs {
		out = append(out, ev.Kind)
	}
	return out
}
