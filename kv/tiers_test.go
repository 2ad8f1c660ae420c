package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/transport/mailbox"
)

// tierBlock is the block size of the tier tests: 16 tokens of 4 bytes.
const tierBlock = 64

// faulty is a tier.Storage over another that can hold its copies (gate:
// Lock it, and every copy waits until Unlock) and fail them.
type faulty struct {
	tier.Storage
	gate                 sync.RWMutex
	failWrites           atomic.Bool
	failReadAt, reads    atomic.Int64 // fail the failReadAt-th read (1-based); 0: none
	writesDone, readDone atomic.Int64
}

var errInjected = errors.New("injected fault")

func (f *faulty) WriteSlot(slot int, k tier.Key, gen uint64, src []byte) error {
	f.gate.RLock()
	defer f.gate.RUnlock()
	defer f.writesDone.Add(1)
	if f.failWrites.Load() {
		return errInjected
	}
	return f.Storage.WriteSlot(slot, k, gen, src)
}

func (f *faulty) ReadSlot(slot int, k tier.Key, gen uint64, dst []byte) error {
	f.gate.RLock()
	defer f.gate.RUnlock()
	defer f.readDone.Add(1)
	if n := f.reads.Add(1); n == f.failReadAt.Load() {
		return fmt.Errorf("%w: %w", tier.ErrCorrupt, errInjected)
	}
	return f.Storage.ReadSlot(slot, k, gen, dst)
}

// hostTier returns a host tier of n blocks on the Go heap (so the race
// detector sees the copies), wrapped in a faulty storage.
func hostTier(t testing.TB, n int, opts ...tier.Option) (*tier.Manager, *faulty) {
	t.Helper()
	st, err := host.New(tierBlock, n, host.WithHeap())
	require.NoError(t, err)
	f := &faulty{Storage: st}
	m, err := tier.New(f, append([]tier.Option{tier.WithWorkers(2)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Check())
		_ = m.Close()
	})
	return m, f
}

// diskTier returns a disk tier of n blocks in a temporary file.
func diskTier(t testing.TB, n int) *tier.Manager {
	t.Helper()
	st, err := disk.Open(filepath.Join(t.TempDir(), "tier"), tierBlock, n)
	require.NoError(t, err)
	m, err := tier.New(st, tier.WithWorkers(2))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Check())
		_ = m.Close()
	})
	return m
}

type hotPool = pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy]

// tiered returns a manager of a hot pool of n blocks over tiers, checked
// at the end.
func tiered(t testing.TB, n int, tiers []kv.Tier, opts ...kv.Option) (*kv.Manager, *hotPool) {
	t.Helper()
	p := newPool(t, n, tierBlock)
	m, err := kv.New(p, append([]kv.Option{kv.WithTiers(tiers...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := m.Check(); err != nil {
			t.Errorf("invariants at the end: %v", err)
		}
		settle(t, m)
		require.NoError(t, m.Close())
	})
	return m, p
}

// engine plays the serving engine: it writes each computed block's KV (a
// pattern derived from the block's chain hash) and checks the KV of every
// block it did not compute.
type engine struct {
	t testing.TB
	m *kv.Manager
	p *hotPool
	h *kv.Hasher
}

// hostEngine returns an engine over a manager of 16 blocks with opts
// and a host tier of 32 (hostTier), and the tier's faulty storage.
func hostEngine(t testing.TB, opts ...kv.Option) (*kv.Manager, *engine, *tier.Manager, *faulty) {
	t.Helper()
	h, f := hostTier(t, 32)
	m, p := tiered(t, 16, []kv.Tier{h}, opts...)
	return m, newEngine(t, m, p), h, f
}

// newEngine returns an engine over m and its pool p.
func newEngine(t testing.TB, m *kv.Manager, p *hotPool) *engine {
	return &engine{t: t, m: m, p: p, h: m.Hasher()}
}

// serve admits tokens, runs the sequence and releases it, as a request the
// engine serves whole; it returns how many tokens the run computed.
func (e *engine) serve(tokens []uint32, key kv.Key) int {
	e.t.Helper()
	id, _, err := e.m.Admit(tokens, key)
	require.NoError(e.t, err)
	n := e.run(id, tokens, key)
	require.NoError(e.t, e.m.Release(id))
	return n
}

// reset empties m's pool of cached blocks (Reset), failing t if it fails.
func reset(t testing.TB, m *kv.Manager) {
	t.Helper()
	_, err := m.Reset()
	require.NoError(t, err)
}

// pattern is the KV of the block of hash h.
func pattern(h kv.Hash) []byte {
	b := h.AppendBytes(nil)
	return bytes.Repeat(b, tierBlock/len(b)+1)[:tierBlock]
}

// chain returns the hashes of the full blocks of tokens.
func (e *engine) chain(tokens []uint32, key kv.Key) []kv.Hash {
	var out []kv.Hash
	var parent kv.Hash
	for i := 0; i+16 <= len(tokens); i += 16 {
		parent = e.h.Block(parent, tokens[i:i+16], key)
		out = append(out, parent)
	}
	return out
}

// run checks the KV of a ready sequence's first cached tokens and
// computes the rest of its full blocks, as a forward pass would.
func (e *engine) run(id kv.SeqID, tokens []uint32, key kv.Key) int {
	e.t.Helper()
	cached, ready, err := e.m.Ready(id)
	require.NoError(e.t, err)
	require.True(e.t, ready, "the engine must not run a sequence waiting for loads")
	hs, err := e.m.Blocks(id)
	require.NoError(e.t, err)
	for i, h := range e.chain(tokens, key) {
		b, err := e.p.Bytes(hs[i])
		require.NoError(e.t, err)
		if i*16 < cached {
			require.Equal(e.t, pattern(h), b, "block %d of %d cached tokens serves wrong KV", i, cached)
		} else {
			copy(b, pattern(h))
		}
	}
	return cached
}

// settle drains until no copy is in flight.
func settle(t testing.TB, m *kv.Manager) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := m.Drain()
		require.NoError(t, err)
		if m.Stats().InFlight == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "copies still in flight: %+v", m.Stats())
		time.Sleep(100 * time.Microsecond)
	}
}

// identity checks kv's accounting identity.
func identity(t testing.TB, m *kv.Manager) kv.Stats {
	t.Helper()
	st := m.Stats()
	require.Equal(t, st.Capacity, st.Free+st.Cached+st.InUse, "%+v", st)
	require.LessOrEqual(t, st.InFlight, st.InUse)
	require.NoError(t, m.Check())
	return st
}

func sources(t testing.TB, m *kv.Manager, id kv.SeqID) string {
	t.Helper()
	src, err := m.Sources(id, nil)
	require.NoError(t, err)
	s := ""
	for _, x := range src {
		switch x.Kind {
		case kv.FromHot:
			s += "H"
		case kv.FromTier:
			s += fmt.Sprint(x.Tier)
		case kv.FromCompute:
			s += "C"
		}
	}
	return s
}

// prompt returns n full blocks of tokens starting at v, and one more token.
func prompt(v uint32, n int) []uint32 { return append(span(int(v), int(v)+16*n), 7) }

// TestTierDemoteAndHitFromHost: computed blocks are written through to the
// host tier at the next Drain, held until stored; after the hot pool lost
// them, an admission loads them back and serves the same KV.
func TestTierDemoteAndHitFromHost(t *testing.T) {
	m, e, h, _ := hostEngine(t)
	a := prompt(0, 4)

	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 0, cached)
	require.Equal(t, 4, identity(t, m).InFlight, "completed blocks are held for their store")
	e.run(id, a, kv.Key{})
	require.NoError(t, m.Release(id))
	st := identity(t, m)
	require.Equal(t, 4, st.InUse, "released blocks stay held until stored")
	require.Equal(t, 0, st.Cached)

	settle(t, m)
	st = identity(t, m)
	require.Equal(t, uint64(4), st.Tiers[0].StoredBlocks)
	require.Equal(t, 4, st.Cached)
	require.Equal(t, 4, h.Stats().Evictable)

	n, err := m.Reset() // the hot pool forgets them
	require.NoError(t, err)
	require.Equal(t, 4, n)

	a2, err := m.CanAdmit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, a2.CachedTokens)
	require.Equal(t, 4, a2.LoadBlocks)
	require.Equal(t, 5, a2.Need, "loads go into blocks the admission allocates")
	lookups := h.Stats().Lookups

	id, cached, err = m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.Equal(t, lookups+4, h.Stats().Lookups, "CanAdmit peeks, Admit looks up")
	require.Equal(t, "0000C", sources(t, m, id))
	_, ready, err := m.Ready(id)
	require.NoError(t, err)
	require.False(t, ready)
	require.ErrorIs(t, m.Append(id, []uint32{1}), kv.ErrNotReady)
	_, err = m.Fork(id)
	require.ErrorIs(t, err, kv.ErrNotReady)
	require.Equal(t, 0, len(m.CachedHashes()), "blocks being loaded are not hits")

	settle(t, m)
	require.Equal(t, 64, e.run(id, a, kv.Key{}))
	require.NoError(t, m.Append(id, []uint32{1}))
	st = identity(t, m)
	require.Equal(t, uint64(4), st.Tiers[0].HitBlocks)
	require.Equal(t, uint64(64), st.Tiers[0].HitTokens)
	require.Equal(t, uint64(4), st.Tiers[0].LoadedBlocks)
	require.Equal(t, uint64(0), st.HitTokens)
	require.Equal(t, 4, len(m.CachedHashes()), "loaded blocks are hits once ready")
	require.Positive(t, st.Tiers[0].Bandwidth, "bandwidth measured from the loads")

	id2, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.Equal(t, "HHHHC", sources(t, m, id2))
	e.run(id2, a, kv.Key{})
	require.NoError(t, m.Release(id))
	require.NoError(t, m.Release(id2))
	identity(t, m)
}

// TestTierHitFromDiskAfterHostEvicted: blocks go to every tier; once the
// host tier evicted them, an admission loads them from the disk tier, and
// write-through puts them back into the host tier (staged promotion).
func TestTierHitFromDiskAfterHostEvicted(t *testing.T) {
	h, _ := hostTier(t, 4)
	d := diskTier(t, 64)
	m, p := tiered(t, 16, []kv.Tier{h, d})
	e := newEngine(t, m, p)
	a, b := prompt(0, 4), prompt(1000, 4)
	for _, tokens := range [][]uint32{a, b} {
		e.serve(tokens, kv.Key{})
		settle(t, m)
	}
	st := identity(t, m)
	require.Equal(t, uint64(8), st.Tiers[0].StoredBlocks)
	require.Equal(t, uint64(8), st.Tiers[1].StoredBlocks)
	require.Equal(t, uint64(4), h.Stats().Evictions, "b's blocks evicted a's from the host tier")
	reset(t, m)

	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.Equal(t, "1111C", sources(t, m, id))
	settle(t, m)
	e.run(id, a, kv.Key{})
	settle(t, m) // the loaded blocks are written through to the host tier
	require.Equal(t, []tier.Result{tier.Hit, tier.Hit, tier.Hit, tier.Hit}, h.Peek(keys(e, a), nil))
	st = identity(t, m)
	require.Equal(t, uint64(4), st.Tiers[1].LoadedBlocks)
	require.Equal(t, uint64(12), st.Tiers[0].StoredBlocks)
	require.NoError(t, m.Release(id))

	// b: its first blocks from the disk tier, the host tier holding none
	// of them now; a mixed prefix loads each block from the hottest tier.
	reset(t, m)
	id, cached, err = m.Admit(cat(a[:64], []uint32{9}), kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.Equal(t, "0000C", sources(t, m, id))
	settle(t, m)
	e.run(id, cat(a[:64], []uint32{9}), kv.Key{})
	require.NoError(t, m.Release(id))
}

func keys(e *engine, tokens []uint32) []tier.Key {
	var out []tier.Key
	for _, h := range e.chain(tokens, kv.Key{}) {
		out = append(out, tier.KeyOf(h.AppendBytes(nil), 0))
	}
	return out
}

// TestTierResetWhileCopiesInFlight: a tier reset while its copies run
// makes their completions stale: a store leaves its blocks cached in the
// pool only, a load falls back to computing.
func TestTierResetWhileCopiesInFlight(t *testing.T) {
	m, e, h, f := hostEngine(t)
	a := prompt(0, 4)

	e.serve(a, kv.Key{})
	f.gate.Lock()
	_, err := m.Drain() // issues the stores, which wait at the gate
	require.NoError(t, err)
	require.Equal(t, 4, identity(t, m).InFlight)
	require.NoError(t, h.Reset())
	f.gate.Unlock()
	settle(t, m)
	st := identity(t, m)
	require.Equal(t, uint64(0), st.Tiers[0].StoredBlocks)
	require.Equal(t, uint64(1), st.Tiers[0].StoreFailures)
	require.Equal(t, 4, st.Cached, "the blocks stay cached in the pool")
	require.Equal(t, uint64(1), h.Stats().StaleCompletions)

	// Store them for real, then reset the tier under a load.
	reset(t, m)
	e.serve(a, kv.Key{})
	settle(t, m)
	require.Equal(t, uint64(4), identity(t, m).Tiers[0].StoredBlocks)
	reset(t, m)

	f.gate.Lock()
	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.NoError(t, h.Reset())
	f.gate.Unlock()
	settle(t, m)
	cached, ready, err := m.Ready(id)
	require.NoError(t, err)
	require.True(t, ready)
	require.Equal(t, 0, cached, "a stale load is never served")
	require.Equal(t, "CCCCC", sources(t, m, id))
	require.Equal(t, 0, e.run(id, a, kv.Key{}))
	st = identity(t, m)
	require.Equal(t, uint64(4), st.Tiers[0].FailedBlocks)
	require.Equal(t, uint64(0), st.Tiers[0].LoadedBlocks)
	require.NoError(t, m.Release(id))
}

// TestTierFailedStore: a store copy that fails leaves nothing in the tier
// and the blocks cached in the pool.
func TestTierFailedStore(t *testing.T) {
	m, e, h, f := hostEngine(t)
	a := prompt(0, 4)
	f.failWrites.Store(true)
	e.serve(a, kv.Key{})
	settle(t, m)
	st := identity(t, m)
	require.Equal(t, uint64(1), st.Tiers[0].StoreFailures)
	require.Equal(t, uint64(0), st.Tiers[0].StoredBlocks)
	require.Equal(t, 4, st.Cached)
	require.Equal(t, 32, h.Stats().Free)
	reset(t, m)
	la, err := m.Lookup(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 0, la)
}

// TestTierFailedLoadRecomputes: a load that fails at its third block
// serves the first two and leaves the rest to compute; the corrupt block
// leaves the tier.
func TestTierFailedLoadRecomputes(t *testing.T) {
	h, f := hostTier(t, 32, tier.WithWorkers(1))
	m, p := tiered(t, 16, []kv.Tier{h})
	e := newEngine(t, m, p)
	a := prompt(0, 4)
	e.serve(a, kv.Key{})
	settle(t, m)
	reset(t, m)

	f.failReadAt.Store(f.reads.Load() + 3)
	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	settle(t, m)
	cached, ready, err := m.Ready(id)
	require.NoError(t, err)
	require.True(t, ready)
	require.Equal(t, 32, cached)
	require.Equal(t, "00CCC", sources(t, m, id))
	require.Equal(t, 32, e.run(id, a, kv.Key{}))
	st := identity(t, m)
	require.Equal(t, uint64(2), st.Tiers[0].LoadedBlocks)
	require.Equal(t, uint64(2), st.Tiers[0].FailedBlocks)
	require.Equal(t, 3, h.Stats().Evictable, "the corrupt block left the tier")
	require.Equal(t, 2, len(m.CachedHashes()), "computed blocks are cached once the engine ran the sequence")
	require.NoError(t, m.Append(id, []uint32{1})) // the decode step
	require.Equal(t, 4, len(m.CachedHashes()))
	require.NoError(t, m.Release(id))
	settle(t, m) // the recomputed block is written through again
	require.Equal(t, 4, h.Stats().Evictable)

	// The recomputed KV is served from the pool, then from the tier.
	id, cached, err = m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	e.run(id, a, kv.Key{})
	require.NoError(t, m.Release(id))
	reset(t, m)
	id, _, err = m.Admit(a, kv.Key{})
	require.NoError(t, err)
	settle(t, m)
	require.Equal(t, 64, e.run(id, a, kv.Key{}))
	require.NoError(t, m.Release(id))
}

// dropper is a kv.Tier that loses the completions of jobs it is told to:
// a tier whose completion never comes back.
type dropper struct {
	*tier.Manager
	drop atomic.Bool
	lost []tier.Done
}

func (d *dropper) Drain(dst []tier.Done) ([]tier.Done, error) {
	n := len(dst)
	dst, err := d.Manager.Drain(dst)
	if d.drop.Load() {
		d.lost = append(d.lost, dst[n:]...)
		dst = dst[:n]
	}
	return dst, err
}

// TestTierLostCompletion: blocks whose copy never reports back are never
// reused: they stay in flight (in use), the sequence never becomes ready,
// preempting it does not free them, and Close keeps them out of the pool.
// Closing the tier, which stops its copies, gives them back.
func TestTierLostCompletion(t *testing.T) {
	h, _ := hostTier(t, 32)
	d := &dropper{Manager: h}
	m, p := tiered(t, 8, []kv.Tier{d})
	e := newEngine(t, m, p)
	a := prompt(0, 4)
	e.serve(a, kv.Key{})
	settle(t, m)
	reset(t, m)

	d.drop.Store(true)
	id, _, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	loaded := ids(t, m, id)[:4]
	for len(d.lost) == 0 {
		_, err = m.Drain()
		require.NoError(t, err)
		time.Sleep(100 * time.Microsecond)
	}
	_, ready, err := m.Ready(id)
	require.NoError(t, err)
	require.False(t, ready)
	_, err = m.Preempt(id)
	require.NoError(t, err)
	st := identity(t, m)
	require.Equal(t, 4, st.InFlight)
	require.Equal(t, 4, st.InUse)

	// Every other block is taken; none of the loaded ones is reused.
	other, _, err := m.Admit(span(5000, 5000+4*16), kv.Key{})
	require.NoError(t, err)
	for _, b := range ids(t, m, other) {
		require.NotContains(t, loaded, b)
	}
	_, _, err = m.Admit(span(9000, 9010), kv.Key{})
	require.ErrorIs(t, err, pool.ErrExhausted)
	require.NoError(t, m.Release(other))

	// Closing the tier stops its copies: the next Drain abandons its jobs.
	require.NoError(t, h.Close())
	_, err = m.Drain()
	require.NoError(t, err)
	st = identity(t, m)
	require.Equal(t, 0, st.InFlight)
	require.Equal(t, 0, st.InUse)
	require.Equal(t, uint64(0), st.Tiers[0].FailedBlocks+st.Tiers[0].LoadedBlocks, "the sequence was preempted")
	// A closed tier is a miss.
	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 0, cached)
	require.NoError(t, m.Release(id))
}

// TestTierCloseInFlight: Close keeps blocks whose copy may still run out
// of the pool, and says so.
func TestTierCloseInFlight(t *testing.T) {
	h, f := hostTier(t, 32)
	p := newPool(t, 8, tierBlock)
	m, err := kv.New(p, kv.WithTiers(h))
	require.NoError(t, err)
	id, _, err := m.Admit(prompt(0, 2), kv.Key{})
	require.NoError(t, err)
	require.NoError(t, m.Release(id))
	f.gate.Lock()
	_, err = m.Drain()
	require.NoError(t, err)
	err = m.Close()
	f.gate.Unlock()
	require.ErrorIs(t, err, kv.ErrInFlight)
	require.Equal(t, 2, p.Live(), "the blocks being stored stay allocated")
}

// TestTierLoadPolicy: the default policy loads only what is cheaper than
// computing; a policy of one's own decides how much of the prefix loads.
func TestTierLoadPolicy(t *testing.T) {
	store := func(t *testing.T, opts ...kv.Option) (*kv.Manager, *tier.Manager) {
		m, e, h, _ := hostEngine(t, opts...)
		a := prompt(0, 4)
		e.serve(a, kv.Key{})
		settle(t, m)
		reset(t, m)
		return m, h
	}
	t.Run("slower than compute", func(t *testing.T) {
		// 64 bytes at 64 B/s: 1 s a block, 16 µs to compute it.
		m, _ := store(t, kv.WithLoadCost(kv.LoadCost{ComputePerToken: time.Microsecond, Bandwidth: []float64{64}}))
		id, cached, err := m.Admit(prompt(0, 4), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 0, cached)
		require.Equal(t, "CCCCC", sources(t, m, id))
		require.Equal(t, uint64(4), m.Stats().Tiers[0].DeclinedBlocks)
		require.NoError(t, m.Release(id))
	})
	t.Run("faster than compute", func(t *testing.T) {
		m, _ := store(t, kv.WithLoadCost(kv.LoadCost{ComputePerToken: time.Microsecond, Bandwidth: []float64{1 << 30}}))
		_, cached, err := m.Admit(prompt(0, 4), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 64, cached)
	})
	t.Run("overhead", func(t *testing.T) {
		// 4 blocks save 4 × 16 µs = 64 µs, less than a 1 ms wait.
		m, _ := store(t, kv.WithLoadCost(kv.LoadCost{ComputePerToken: time.Microsecond, Overhead: time.Millisecond}))
		_, cached, err := m.Admit(prompt(0, 4), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 0, cached)
	})
	t.Run("own policy", func(t *testing.T) {
		var seen kv.LoadQuery
		m, _ := store(t, kv.WithLoadPolicy(func(q *kv.LoadQuery) int {
			seen = *q
			seen.From = append([]int(nil), q.From...)
			return 2
		}))
		a, err := m.CanAdmit(prompt(0, 4), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 32, a.CachedTokens)
		id, cached, err := m.Admit(prompt(0, 4), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 32, cached)
		require.Equal(t, []int{0, 0, 0, 0}, seen.From)
		require.Equal(t, tierBlock, seen.BlockBytes)
		require.Equal(t, 16, seen.TokensPerBlock)
		require.Equal(t, "00CCC", sources(t, m, id))
		require.Equal(t, uint64(2), m.Stats().Tiers[0].DeclinedBlocks)
		settle(t, m)
		require.NoError(t, m.Release(id))
	})
}

// TestCostPolicy: the prefix that saves the most.
func TestCostPolicy(t *testing.T) {
	q := &kv.LoadQuery{From: []int{0, 0, 1, 1}, TokensPerBlock: 16, BlockBytes: 1 << 20,
		Bandwidth: []float64{1 << 30, 1 << 20}, ComputePerToken: time.Microsecond}
	// Tier 0: ~1 ms per MiB block, saves 16 µs - 1 ms: never worth it.
	require.Equal(t, 0, kv.CostPolicy(q))
	q.ComputePerToken = time.Millisecond // 16 ms a block: tier 0 worth it, tier 1 (1 s a block) not
	require.Equal(t, 2, kv.CostPolicy(q))
	q.Bandwidth[1] = 0 // unknown: assumed fast
	require.Equal(t, 4, kv.CostPolicy(q))
	q.ComputePerToken = 0
	require.Equal(t, 4, kv.CostPolicy(q))
}

// TestTierWriteBack: with write-back, blocks are stored only when the
// watermarks evict them, and evicted once stored; a hit meanwhile keeps
// them.
func TestTierWriteBack(t *testing.T) {
	m, e, _, _ := hostEngine(t, kv.WithDemotion(kv.WriteBack), kv.WithWatermarks(0.75, 0.25))
	var all [][]uint32
	for v := range 3 {
		a := prompt(uint32(v*1000), 4)
		all = append(all, a)
		e.serve(a, kv.Key{})
	}
	st := identity(t, m)
	require.Equal(t, 0, st.InFlight)
	require.Equal(t, 12, st.Cached)
	_, err := m.Drain() // 12 of 16 used: evict down to 4, storing first
	require.NoError(t, err)
	st = identity(t, m)
	require.Equal(t, 8, st.InFlight)
	require.Equal(t, 4, st.Cached)
	// A hit on a victim being stored takes it back.
	hit, cached, err := m.Admit(all[0], kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	settle(t, m)
	st = identity(t, m)
	require.Equal(t, uint64(8), st.Tiers[0].StoredBlocks)
	require.Equal(t, uint64(4), st.WatermarkEvictions)
	e.run(hit, all[0], kv.Key{})
	require.NoError(t, m.Release(hit))
	id, cached, err := m.Admit(all[1], kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.Equal(t, "0000C", sources(t, m, id))
	settle(t, m)
	e.run(id, all[1], kv.Key{})
	require.NoError(t, m.Release(id))
}

// TestTierOptions: configurations that cannot work are refused.
func TestTierOptions(t *testing.T) {
	h, _ := hostTier(t, 4)
	h2, _ := hostTier(t, 4)
	st, err := host.New(128, 4, host.WithHeap())
	require.NoError(t, err)
	big, err := tier.New(st)
	require.NoError(t, err)
	defer big.Close()
	var nilTier *tier.Manager
	for name, opts := range map[string][]kv.Option{
		"block size":         {kv.WithTiers(big)},
		"too many":           {kv.WithTiers(h, h2, h, h2, h)},
		"twice":              {kv.WithTiers(h, h)},
		"nil":                {kv.WithTiers(nilTier)},
		"no caching":         {kv.WithTiers(h), kv.WithPrefixCaching(false)},
		"write-back no wm":   {kv.WithTiers(h), kv.WithDemotion(kv.WriteBack)},
		"write-back no tier": {kv.WithDemotion(kv.WriteBack), kv.WithWatermarks(0.9, 0.5)},
		"bad demotion":       {kv.WithTiers(h), kv.WithDemotion(9)},
		"nil policy":         {kv.WithTiers(h), kv.WithLoadPolicy(nil)},
		"negative cost":      {kv.WithTiers(h), kv.WithLoadCost(kv.LoadCost{ComputePerToken: -1})},
		"bandwidths":         {kv.WithTiers(h), kv.WithLoadCost(kv.LoadCost{Bandwidth: []float64{1, 2}})},
	} {
		_, err := kv.New(newPool(t, 8, tierBlock), opts...)
		require.ErrorIs(t, err, pool.ErrInvalidConfig, name)
	}
	require.Equal(t, "write-through", kv.WriteThrough.String())
	require.Equal(t, "write-back", kv.WriteBack.String())
	require.Equal(t, "tier", kv.FromTier.String())
}

// TestTierStateMachine drives a manager over a small host tier (faulty:
// failing stores and loads, copies held at a gate) and a disk tier with
// random admissions, decode steps, releases, preemptions, drains and
// resets of the pool and of the host tier, and checks after every step
// the manager's and the tiers' invariants and, through the engine, that
// every block a sequence did not compute holds the KV of its prefix: no
// load is served before it completed, no failed or stale one ever, and no
// block is reused while a copy reads it. Run it with -race: the host
// tier is on the Go heap, so the race detector sees the copies.
//
// Whether a load completes while its sequence is still live depends on
// how the copy workers are scheduled: on a loaded machine one seed's run
// may see every load abandoned. So the check that the runs served loads
// at all is over the four seeds together.
func TestTierStateMachine(t *testing.T) {
	var loaded uint64
	for seed := range int64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { loaded += tierStateMachine(t, seed) })
	}
	require.Positive(t, loaded, "no run served a block loaded from a tier")
}

type tseq struct {
	id       kv.SeqID
	tokens   []uint32
	ran      bool
	computed int // full blocks whose KV is written
}

// tierStateMachine runs one seed and returns how many blocks it loaded
// from the tiers.
func tierStateMachine(t *testing.T, seed int64) uint64 {
	h, f := hostTier(t, 16)
	d := diskTier(t, 48)
	opts := []kv.Option{}
	if seed%2 == 1 {
		opts = append(opts, kv.WithDemotion(kv.WriteBack), kv.WithWatermarks(0.6, 0.3))
	}
	m, p := tiered(t, 32, []kv.Tier{h, d}, opts...)
	e := newEngine(t, m, p)
	rng := newRand(seed)
	var bases [4][]uint32
	for c := range bases {
		bases[c] = span(c*10000, c*10000+6*16)
	}
	var live []*tseq
	gated := false
	// run computes a ready sequence the first time, then its decode steps.
	run := func(s *tseq) {
		if !s.ran {
			cached := e.run(s.id, s.tokens, kv.Key{})
			s.ran = true
			s.computed = len(s.tokens) / 16
			require.LessOrEqual(t, cached, len(s.tokens))
			return
		}
		tok := uint32(rng.next(50000))
		if err := m.Append(s.id, []uint32{tok}); err != nil {
			require.ErrorIs(t, err, pool.ErrExhausted)
			return
		}
		s.tokens = append(s.tokens, tok)
		hs := e.chain(s.tokens, kv.Key{})
		blocks, err := m.Blocks(s.id)
		require.NoError(t, err)
		for ; s.computed < len(hs); s.computed++ {
			b, err := p.Bytes(blocks[s.computed])
			require.NoError(t, err)
			copy(b, pattern(hs[s.computed]))
		}
	}
	runReady := func() {
		for _, s := range live {
			if _, ready, err := m.Ready(s.id); err == nil && ready && !s.ran {
				run(s)
			}
		}
	}
	remove := func(i int) { live = append(live[:i], live[i+1:]...) }
	for step := range 1500 {
		switch op := rng.next(100); {
		case op < 25:
			c := rng.next(len(bases))
			tokens := append([]uint32(nil), bases[c][:16*(1+rng.next(6))]...)
			tokens = append(tokens, span(int(step)*100, int(step)*100+1+rng.next(20))...)
			a, err := m.CanAdmit(tokens, kv.Key{})
			require.NoError(t, err)
			id, cached, err := m.Admit(tokens, kv.Key{})
			if err != nil {
				require.ErrorIs(t, err, pool.ErrExhausted)
				require.NotEqual(t, kv.AdmitOK, a.Status)
				continue
			}
			require.Equal(t, a.CachedTokens, cached, "CanAdmit and Admit agree")
			s := &tseq{id: id, tokens: tokens}
			live = append(live, s)
			if _, ready, _ := m.Ready(id); ready {
				run(s)
			}
		case op < 45:
			for _, s := range live {
				if s.ran && rng.next(2) == 0 {
					run(s)
				}
			}
		case op < 55 && len(live) > 0:
			i := rng.next(len(live))
			require.NoError(t, m.Release(live[i].id))
			remove(i)
		case op < 58 && len(live) > 0:
			i := rng.next(len(live))
			_, err := m.Preempt(live[i].id)
			require.NoError(t, err)
			remove(i)
		case op < 88:
			_, err := m.Drain()
			require.NoError(t, err)
			runReady()
		case op < 92:
			reset(t, m)
		case op < 93:
			require.NoError(t, h.Reset())
		case op < 95:
			f.failWrites.Store(!f.failWrites.Load())
		case op < 96:
			f.failReadAt.Store(f.reads.Load() + 1 + int64(rng.next(3)))
		default:
			if gated {
				f.gate.Unlock()
			} else {
				f.gate.Lock()
			}
			gated = !gated
		}
		identity(t, m)
		require.NoError(t, h.Check())
		require.NoError(t, d.Check())
	}
	if gated {
		f.gate.Unlock()
	}
	settle(t, m)
	runReady()
	for _, s := range live {
		require.NoError(t, m.Release(s.id))
	}
	settle(t, m)
	st := identity(t, m)
	require.Equal(t, 0, st.InUse)
	for _, ts := range st.Tiers[:2] {
		require.LessOrEqual(t, ts.LoadedBlocks+ts.FailedBlocks, ts.HitBlocks)
	}
	require.Zero(t, h.Stats().CopyConflicts)
	t.Logf("%+v", st.Tiers[:2])
	return st.Tiers[0].LoadedBlocks + st.Tiers[1].LoadedBlocks
}

// rand is a small deterministic generator (the op sequence of a seed is
// fixed; the copies' timing is not).
type rand struct{ s uint64 }

func newRand(seed int64) *rand { return &rand{s: uint64(seed)*0x9E3779B97F4A7C15 + 1} }

func (r *rand) next(n int) int {
	r.s ^= r.s << 13
	r.s ^= r.s >> 7
	r.s ^= r.s << 17
	return int(r.s % uint64(n))
}

// faultyDisk returns a disk tier of n blocks wrapped in a faulty storage.
func faultyDisk(t testing.TB, n int) (*tier.Manager, *faulty) {
	t.Helper()
	st, err := disk.Open(filepath.Join(t.TempDir(), "tier"), tierBlock, n)
	require.NoError(t, err)
	f := &faulty{Storage: st}
	m, err := tier.New(f, tier.WithWorkers(2))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Check())
		_ = m.Close()
	})
	return m, f
}

// stagedSetup stores a and b through a host tier of 4 blocks (which keeps
// b's) and a disk tier, then empties the hot pool: a is on disk only.
func stagedSetup(t *testing.T, opts ...kv.Option) (m *kv.Manager, e *engine, h *tier.Manager, hf *faulty, d *tier.Manager, df *faulty, a []uint32) {
	h, hf = hostTier(t, 4)
	d, df = faultyDisk(t, 64)
	m, p := tiered(t, 16, []kv.Tier{h, d}, append([]kv.Option{kv.WithPromotion(kv.PromoteStaged)}, opts...)...)
	e = newEngine(t, m, p)
	a = prompt(0, 4)
	for _, tokens := range [][]uint32{a, prompt(1000, 4)} {
		e.serve(tokens, kv.Key{})
		settle(t, m)
	}
	reset(t, m)
	require.Equal(t, []tier.Result{tier.Miss, tier.Miss, tier.Miss, tier.Miss}, h.Peek(keys(e, a), nil))
	return m, e, h, hf, d, df, a
}

// lockGate holds f's copies until the returned unlock, or the end of the
// test (a failed test must not leave copies waiting: Close waits for them).
func lockGate(t *testing.T, f *faulty) (unlock func()) {
	f.gate.Lock()
	var once sync.Once
	unlock = func() { once.Do(f.gate.Unlock) }
	t.Cleanup(unlock)
	return unlock
}

// waitUntil drains m until cond holds.
func waitUntil(t *testing.T, m *kv.Manager, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		_, err := m.Drain()
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		time.Sleep(100 * time.Microsecond)
	}
}

// TestTierStagedPromotion: with PromoteStaged, a disk hit is stored into
// the host tier before the sequence is Ready: while the host's copy is
// held at its gate, the disk load is done and the sequence still waits;
// once it lands, the host tier holds the blocks, the sequence serves the
// same KV, and the write-through that follows copies nothing twice.
func TestTierStagedPromotion(t *testing.T) {
	m, e, h, hf, d, _, a := stagedSetup(t)
	stored := identity(t, m).Tiers[0].StoredBlocks
	require.Equal(t, uint64(8), stored)

	unlock := lockGate(t, hf)
	id, cached, err := m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 64, cached)
	require.Equal(t, "1111C", sources(t, m, id))
	waitUntil(t, m, "the disk load", func() bool { return d.Stats().Loads == 4 })
	_, err = m.Drain()
	require.NoError(t, err)
	_, ready, err := m.Ready(id)
	require.NoError(t, err)
	require.False(t, ready, "ready before the host tier holds the disk hit")
	require.Equal(t, 4, h.Stats().StorePending, "the staging store into the host tier is under way")
	require.ErrorIs(t, m.Append(id, []uint32{1}), kv.ErrNotReady)
	identity(t, m)
	unlock()

	waitUntil(t, m, "ready", func() bool { _, ok, _ := m.Ready(id); return ok })
	require.Equal(t, []tier.Result{tier.Hit, tier.Hit, tier.Hit, tier.Hit}, h.Peek(keys(e, a), nil), "staged into the host tier")
	require.Equal(t, 64, e.run(id, a, kv.Key{}))
	require.Equal(t, "1111C", sources(t, m, id))
	settle(t, m) // write-through of the blocks: both tiers hold them
	st := identity(t, m)
	require.Equal(t, uint64(4), st.Tiers[1].LoadedBlocks)
	require.Equal(t, uint64(4), st.Tiers[1].HitBlocks)
	require.Equal(t, stored+4, st.Tiers[0].StoredBlocks, "each block stored into the host tier once")
	require.Equal(t, uint64(4), st.Tiers[0].PromotedBlocks)
	require.Equal(t, uint64(0), st.Tiers[0].StoreFailures)
	require.Equal(t, uint64(8), st.Tiers[1].StoredBlocks, "nothing stored into the disk tier again")
	require.NoError(t, m.Release(id))

	// The next admission of a hits the host tier.
	reset(t, m)
	id, _, err = m.Admit(a, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, "0000C", sources(t, m, id))
	settle(t, m)
	e.run(id, a, kv.Key{})
	require.NoError(t, m.Release(id))
}

// TestTierStagedPromotionFaults: staging never costs the load. A host
// tier whose copy fails, or that has no room (every slot being stored),
// leaves the sequence Ready with the disk's blocks, counted as the host
// tier's store failure; a disk load that fails recomputes and stages
// nothing.
func TestTierStagedPromotionFaults(t *testing.T) {
	t.Run("host copy fails", func(t *testing.T) {
		m, e, h, hf, _, _, a := stagedSetup(t)
		hf.failWrites.Store(true)
		id, _, err := m.Admit(a, kv.Key{})
		require.NoError(t, err)
		waitUntil(t, m, "ready", func() bool { _, ok, _ := m.Ready(id); return ok })
		require.Equal(t, 64, e.run(id, a, kv.Key{}))
		st := identity(t, m)
		require.Equal(t, uint64(4), st.Tiers[1].LoadedBlocks)
		require.Equal(t, uint64(0), st.Tiers[0].PromotedBlocks)
		require.Equal(t, uint64(1), st.Tiers[0].StoreFailures)
		require.Equal(t, []tier.Result{tier.Miss, tier.Miss, tier.Miss, tier.Miss}, h.Peek(keys(e, a), nil))
		hf.failWrites.Store(false)
		require.NoError(t, m.Release(id))
	})
	t.Run("host full", func(t *testing.T) {
		m, e, h, hf, _, _, a := stagedSetup(t)
		// c's write-through store takes all 4 host slots and waits at
		// the gate.
		c := prompt(5000, 4)
		e.serve(c, kv.Key{})
		unlock := lockGate(t, hf)
		_, err := m.Drain()
		require.NoError(t, err)
		require.Equal(t, 4, h.Stats().StorePending)
		failures := identity(t, m).Tiers[0].StoreFailures

		id, _, err := m.Admit(a, kv.Key{})
		require.NoError(t, err)
		waitUntil(t, m, "ready while the host tier is full", func() bool { _, ok, _ := m.Ready(id); return ok })
		require.Equal(t, 64, e.run(id, a, kv.Key{}))
		st := identity(t, m)
		require.Equal(t, failures+1, st.Tiers[0].StoreFailures, "the host tier refused the staging store")
		require.Equal(t, uint64(0), st.Tiers[0].PromotedBlocks)
		unlock()
		settle(t, m)
		require.NoError(t, m.Release(id))
	})
	t.Run("disk load fails", func(t *testing.T) {
		m, e, h, _, _, df, a := stagedSetup(t)
		df.failReadAt.Store(df.reads.Load() + 1) // the first block of the next load
		stored := identity(t, m).Tiers[0].StoredBlocks
		id, cached, err := m.Admit(a, kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 64, cached)
		waitUntil(t, m, "ready", func() bool { _, ok, _ := m.Ready(id); return ok })
		got, _, err := m.Ready(id)
		require.NoError(t, err)
		require.Equal(t, 0, got, "the failed load falls back to computing")
		require.Equal(t, "CCCCC", sources(t, m, id))
		st := identity(t, m)
		require.Equal(t, uint64(4), st.Tiers[1].FailedBlocks)
		require.Equal(t, stored, st.Tiers[0].StoredBlocks, "nothing staged")
		require.Equal(t, 0, h.Stats().StorePending)
		e.run(id, a, kv.Key{})
		require.NoError(t, m.Release(id))
	})
}
