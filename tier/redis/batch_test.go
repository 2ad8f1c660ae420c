package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/redis"
)

// batch returns the arguments of WriteSlots and ReadSlots for blocks
// lo..hi-1 in slots 0.., all of generation gen: the keys, the slots, the
// blocks, per-block generations and zeroed destinations.
func batch(lo, hi int, gen uint64) (keys []tier.Key, slots []int, srcs [][]byte, gens []uint64, dsts [][]byte) {
	for i := lo; i < hi; i++ {
		keys = append(keys, key(i))
		slots = append(slots, i-lo)
		srcs = append(srcs, block(key(i)))
		gens = append(gens, gen)
		dsts = append(dsts, make([]byte, bs))
	}
	return
}

// checkBlocks fails the test unless dsts[i] is the block of keys[i] for
// every i below n.
func checkBlocks(t testing.TB, keys []tier.Key, dsts [][]byte, n int) {
	t.Helper()
	for i := range n {
		if !bytes.Equal(block(keys[i]), dsts[i]) {
			t.Errorf("block %d (%v): wrong bytes served", i, keys[i])
		}
	}
}

// settle waits until no more goroutines run than before, and fails the
// test with their stacks if some outlive a generous bound.
func settle(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("goroutines leaked: %d running, %d before\n%s", runtime.NumGoroutine(), before, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WriteSlots and ReadSlots move a batch in pipelines of WithPipeline
// blocks, check every block as ReadSlot does, and report the first block
// that failed.
func TestBatch(t *testing.T) {
	mr := miniredis.RunT(t)
	st := dial(t, []string{mr.Addr()}, 64, redis.WithPipeline(16))
	defer st.Close()
	keys, slots, srcs, gens, dsts := batch(0, 40, 3)
	failed, err := st.WriteSlots(slots, keys, 3, srcs)
	require.NoError(t, err)
	require.Equal(t, -1, failed)
	require.Equal(t, uint64(3), st.Stats().Pipelines, "40 blocks in pipelines of 16")
	failed, err = st.ReadSlots(slots, keys, gens, dsts)
	require.NoError(t, err)
	require.Equal(t, -1, failed)
	checkBlocks(t, keys, dsts, len(keys))
	// A single read sees a batched write, and the other way round.
	one := make([]byte, bs)
	require.NoError(t, st.ReadSlot(0, keys[7], 3, one))
	require.Equal(t, srcs[7], one)
	require.NoError(t, st.WriteSlot(0, key(100), 5, block(key(100))))
	failed, err = st.ReadSlots([]int{0}, []tier.Key{key(100)}, []uint64{5}, [][]byte{one})
	require.NoError(t, err)
	require.Equal(t, -1, failed)

	// Block 20 gone, block 21 stale, block 25 corrupt: the first is
	// reported; every block of its pipeline is counted.
	mr.Del(st.Key(keys[20]))
	gens[21] = 4
	v, err := mr.Get(st.Key(keys[25]))
	require.NoError(t, err)
	b := []byte(v)
	b[redis.HeaderSize+9] ^= 1
	require.NoError(t, mr.Set(st.Key(keys[25]), string(b)))
	before := st.Stats()
	failed, err = st.ReadSlots(slots, keys, gens, dsts)
	require.ErrorIs(t, err, redis.ErrGone)
	require.ErrorIs(t, err, tier.ErrCorrupt, "the Manager drops the block")
	require.Equal(t, 20, failed)
	checkBlocks(t, keys, dsts, 20)
	after := st.Stats()
	require.Equal(t, before.Gone+1, after.Gone)
	require.Equal(t, before.Corrupt+2, after.Corrupt)
	require.Equal(t, before.Reads+16+13, after.Reads, "pipelines 1 and 2 read; 3 never sent")
	require.Equal(t, before.Pipelines+2, after.Pipelines)

	// Nothing to move.
	failed, err = st.ReadSlots(nil, nil, nil, nil)
	require.NoError(t, err)
	require.Equal(t, -1, failed)

	// WithPipeline(1): one call per block, the same answers.
	one1 := dial(t, []string{mr.Addr()}, 64, redis.WithPipeline(1))
	defer one1.Close()
	keys, slots, srcs, gens, dsts = batch(200, 210, 2)
	failed, err = one1.WriteSlots(slots, keys, 2, srcs)
	require.NoError(t, err)
	require.Equal(t, -1, failed)
	mr.Del(one1.Key(keys[6]))
	failed, err = one1.ReadSlots(slots, keys, gens, dsts)
	require.ErrorIs(t, err, redis.ErrGone)
	require.Equal(t, 6, failed)
	checkBlocks(t, keys, dsts, 6)
	require.Zero(t, one1.Stats().Pipelines)
	require.Equal(t, uint64(10), one1.Stats().Writes)
}

// Bad arguments and a closed Tier: errors, nothing sent, never a panic.
func TestBatchMisuse(t *testing.T) {
	mr := miniredis.RunT(t)
	st := dial(t, []string{mr.Addr()}, 8)
	keys, slots, srcs, gens, dsts := batch(0, 4, 1)
	_, err := st.WriteSlots(slots[:3], keys, 1, srcs)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	_, err = st.ReadSlots(slots, keys, gens[:1], dsts)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	_, err = st.WriteSlots(slots, keys, 0, srcs)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	failed, err := st.WriteSlots([]int{0, 1, 8, 2}, keys, 1, srcs)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	require.Equal(t, 2, failed)
	dsts[3] = dsts[3][:1]
	failed, err = st.ReadSlots(slots, keys, gens, dsts)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	require.Equal(t, 3, failed)
	require.Zero(t, st.Stats().Pipelines)
	require.Empty(t, mr.Keys())
	require.NoError(t, st.Close())
	_, err = st.WriteSlots(slots, keys, 1, srcs)
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = st.ReadSlots(slots, keys, gens, dsts)
	require.ErrorIs(t, err, pool.ErrClosed)
	var nilTier *redis.Tier
	_, err = nilTier.ReadSlots(slots, keys, gens, dsts)
	require.ErrorIs(t, err, pool.ErrClosed)
}

// Needs redis-server. The server is killed while pipelined loads (and a
// Manager's single-block loads) are in flight, then restarted empty: no
// load serves a wrong byte, the failures are counted, the old blocks are
// gone, the client reconnects, and no goroutine outlives the Tier.
func TestServerKilledMidLoad(t *testing.T) {
	s := startServer(t)
	const big = 64 << 10 // bigger blocks keep loads in flight longer
	const n = 32
	before := runtime.NumGoroutine()
	st, err := redis.Dial([]string{s.addr()}, namespace(t), big, 2*n, redis.WithTimeout(300*time.Millisecond))
	require.NoError(t, err)
	m, err := tier.New(st, tier.WithWorkers(2))
	require.NoError(t, err)

	keys := make([]tier.Key, n)
	slots := make([]int, n)
	gens := make([]uint64, n)
	srcs := make([][]byte, n)
	for i := range n {
		keys[i], slots[i], gens[i] = key(i), i, 1
		srcs[i] = bigBlock(keys[i], big)
	}
	failed, err := st.WriteSlots(slots, keys, 1, srcs)
	require.NoError(t, err, "failed at %d", failed)

	var stop atomic.Bool
	var served, failures atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dsts := make([][]byte, n)
			for i := range dsts {
				dsts[i] = make([]byte, big)
			}
			for !stop.Load() {
				failed, err := st.ReadSlots(slots, keys, gens, dsts)
				good := n
				if err != nil {
					failures.Add(1)
					good = failed
					time.Sleep(time.Millisecond) // no busy loop while the server is down
				}
				for i := range good { // the blocks before the first failure
					if !bytes.Equal(srcs[i], dsts[i]) {
						t.Errorf("block %d: wrong bytes served", i)
						return
					}
				}
				served.Add(int64(good))
			}
		}()
	}
	// The owner's Manager: index the blocks, and load them one job at a
	// time while the server dies.
	plan, err := m.PrepareStore(keys)
	require.NoError(t, err)
	require.NoError(t, m.CompleteStore(plan.Job, true))
	managerLoads := func(d time.Duration) (ok, bad int) {
		dst := make([]byte, big)
		for end := time.Now().Add(d); time.Now().Before(end); {
			i := (ok + bad) % n
			if m.Lookup([]tier.Key{keys[i]}, nil)[0] != tier.Hit {
				bad++
				continue
			}
			_, err := m.Load([]tier.Key{keys[i]}, [][]byte{dst})
			require.NoError(t, err)
			done := drain(t, m, 1)[0]
			if !done.OK {
				bad++
				continue
			}
			require.True(t, bytes.Equal(srcs[i], dst), "block %d: the Manager served wrong bytes", i)
			ok++
		}
		return
	}
	ok, _ := managerLoads(100 * time.Millisecond)
	require.Positive(t, ok)
	s.kill() // mid-load: the readers are in their pipelines
	_, bad := managerLoads(100 * time.Millisecond)
	require.Positive(t, bad)
	stats := st.Stats()
	require.Positive(t, stats.Errors+stats.Timeouts, "the failures are counted")
	require.Zero(t, stats.Corrupt)
	s.restart() // empty: no persistence
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	require.Positive(t, failures.Load())
	t.Logf("%d blocks served, %d pipelined loads failed; stats %+v", served.Load(), failures.Load(), st.Stats())

	// Restarted empty: the blocks are gone (misses), new ones are stored
	// and served through the same client.
	dsts := make([][]byte, n)
	for i := range dsts {
		dsts[i] = make([]byte, big)
	}
	require.Eventually(t, func() bool { return st.Ping() == nil }, 5*time.Second, 10*time.Millisecond)
	failed, err = st.ReadSlots(slots, keys, gens, dsts)
	require.ErrorIs(t, err, redis.ErrGone)
	require.Equal(t, 0, failed)
	failed, err = st.WriteSlots(slots, keys, 2, srcs)
	require.NoError(t, err, "failed at %d", failed)
	for i := range gens {
		gens[i] = 2
	}
	failed, err = st.ReadSlots(slots, keys, gens, dsts)
	require.NoError(t, err, "failed at %d", failed)
	for i := range n {
		require.True(t, bytes.Equal(srcs[i], dsts[i]))
	}
	require.Zero(t, st.Stats().Corrupt)
	require.NoError(t, m.Close())
	settle(t, before)
}

func bigBlock(k tier.Key, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = k.Hash[i%32] ^ byte(i/31)
	}
	return b
}

// Needs redis-server. A server at its maxmemory with the noeviction policy
// refuses writes: counted as OOM (and Errors), the store fails, nothing
// corrupt is served.
func TestServerOOM(t *testing.T) {
	s := startServer(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	st := dial(t, []string{s.addr()}, 1024)
	defer st.Close()
	keys, slots, srcs, gens, dsts := batch(0, 1024, 1) // 4 MiB
	failed, err := st.WriteSlots(slots, keys, 1, srcs)
	require.ErrorIs(t, err, redis.ErrUnavailable)
	require.Positive(t, failed)
	stats := st.Stats()
	require.Positive(t, stats.OOM)
	require.GreaterOrEqual(t, stats.Errors, stats.OOM)
	require.NotContains(t, fmt.Sprint(err), "timeout")
	// What was stored before the refusals is served intact.
	got, err := st.ReadSlots(slots[:failed], keys[:failed], gens[:failed], dsts[:failed])
	require.NoError(t, err, "failed at %d", got)
	checkBlocks(t, keys, dsts, failed)
}

func TestScopeNamespace(t *testing.T) {
	base := redis.Scope{Model: "meta-llama/Llama-3.1-8B-Instruct", KVDType: "bf16", BlockTokens: 16, TPSize: 1, PPSize: 1, HashAlgo: "sha256_cbor", HashSeed: "0"}
	ns, err := base.Namespace()
	require.NoError(t, err)
	require.Regexp(t, `^locus:meta-llama/Llama-3\.1-8B-Instruct:[0-9a-f]{16}$`, ns)
	again, _ := base.Namespace()
	require.Equal(t, ns, again, "stable")
	seen := map[string]string{ns: "base"}
	for name, s := range map[string]redis.Scope{
		"revision": func(s redis.Scope) redis.Scope { s.Revision = "abc"; return s }(base),
		"dtype":    func(s redis.Scope) redis.Scope { s.KVDType = "fp8"; return s }(base),
		"layout":   func(s redis.Scope) redis.Scope { s.Layout = "HND"; return s }(base),
		"block":    func(s redis.Scope) redis.Scope { s.BlockTokens = 32; return s }(base),
		"tp rank":  func(s redis.Scope) redis.Scope { s.TPRank, s.TPSize = 1, 2; return s }(base),
		"tp size":  func(s redis.Scope) redis.Scope { s.TPSize = 2; return s }(base),
		"pp":       func(s redis.Scope) redis.Scope { s.PPRank, s.PPSize = 1, 2; return s }(base),
		"algo":     func(s redis.Scope) redis.Scope { s.HashAlgo = "xxhash_cbor"; return s }(base),
		"seed":     func(s redis.Scope) redis.Scope { s.HashSeed = "1"; return s }(base),
		"extra":    func(s redis.Scope) redis.Scope { s.Extra = []string{"adapter-x"}; return s }(base),
		"shifted":  func(s redis.Scope) redis.Scope { s.Model, s.Revision = base.Model+"x", ""; return s }(base),
		"model":    func(s redis.Scope) redis.Scope { s.Model = "Qwen/Qwen3 {8B}:x"; return s }(base),
	} {
		got, err := s.Namespace()
		require.NoError(t, err)
		require.NotContains(t, seen, got, "%s collides with %s", name, seen[got])
		seen[got] = name
		require.False(t, strings.ContainsAny(got, "{} "), got)
	}
	_, err = redis.Scope{}.Namespace()
	require.ErrorIs(t, err, pool.ErrInvalidConfig)
	_, err = redis.Scope{Model: "m", TPRank: -1}.Namespace()
	require.ErrorIs(t, err, pool.ErrInvalidConfig)
	st, err := redis.Dial([]string{"127.0.0.1:1"}, ns, bs, 8)
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

// The benchmarks need redis-server: the blocks of one job moved one per
// round trip (WriteSlot, ReadSlot: what a Manager's copy worker does today)
// against pipelined (WriteSlots, ReadSlots), on loopback and through a
// proxy that delays every chunk each way (a network's latency; the RTT it
// gives is measured and reported as rtt-µs).
func BenchmarkLoad(b *testing.B)  { benchBatch(b, false) }
func BenchmarkStore(b *testing.B) { benchBatch(b, true) }

func benchBatch(b *testing.B, write bool) {
	s := startServer(b)
	const size = 64 << 10
	for _, link := range []struct {
		name  string
		delay time.Duration
	}{{"loopback", 0}, {"delayed", 250 * time.Microsecond}} {
		addr := s.addr()
		if link.delay > 0 {
			addr = delayProxy(b, addr, link.delay)
		}
		for _, n := range []int{8, 32} {
			st, err := redis.Dial([]string{addr}, namespace(b), size, n, redis.WithTimeout(5*time.Second))
			require.NoError(b, err)
			rtt := measureRTT(b, st)
			keys := make([]tier.Key, n)
			slots := make([]int, n)
			gens := make([]uint64, n)
			bufs := make([][]byte, n)
			for i := range n {
				keys[i], slots[i], gens[i] = key(i), i, 1
				bufs[i] = bigBlock(keys[i], size)
			}
			if _, err := st.WriteSlots(slots, keys, 1, bufs); err != nil {
				b.Fatal(err)
			}
			for _, mode := range []string{"single", "pipelined"} {
				b.Run(fmt.Sprintf("%s/blocks=%d/%s", link.name, n, mode), func(b *testing.B) {
					b.SetBytes(int64(n * size))
					b.ReportAllocs()
					for b.Loop() {
						var err error
						switch {
						case mode == "pipelined" && write:
							_, err = st.WriteSlots(slots, keys, 1, bufs)
						case mode == "pipelined":
							_, err = st.ReadSlots(slots, keys, gens, bufs)
						default:
							for i := 0; i < n && err == nil; i++ {
								if write {
									err = st.WriteSlot(i, keys[i], 1, bufs[i])
								} else {
									err = st.ReadSlot(i, keys[i], 1, bufs[i])
								}
							}
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(rtt.Microseconds()), "rtt-µs")
				})
			}
			_ = st.Close()
		}
	}
}

// measureRTT returns the median time of a PING through st's client.
func measureRTT(b *testing.B, st *redis.Tier) time.Duration {
	var ds []time.Duration
	for range 51 {
		began := time.Now()
		if err := st.Client().Ping(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(began))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// delayProxy listens on a loopback port and forwards every connection to
// addr, holding each chunk read for d before writing it on (the one-way
// latency of a network; bandwidth kept). It stops when the benchmark ends.
func delayProxy(b *testing.B, addr string, d time.Duration) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	b.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); forward(s, c, d) }()
			go func() { defer wg.Done(); forward(c, s, d) }()
		}
	}()
	return ln.Addr().String()
}

// forward copies src to dst, each chunk d after it was read.
func forward(dst, src net.Conn, d time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 4096)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 256<<10)
			n, err := src.Read(buf)
			if n > 0 {
				ch <- chunk{buf[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	for range ch { // let the reader end
	}
}

// A Manager over the tier stores and loads a job of several blocks through
// one pipeline (tier.BatchStorage), and a job of one block without one.
func TestManagerPipelines(t *testing.T) {
	mr := miniredis.RunT(t)
	st := dial(t, []string{mr.Addr()}, 64, redis.WithPipeline(64))
	m := manager(t, st)
	for _, d := range store(t, m, 0, 32) {
		require.True(t, d.OK)
	}
	require.Equal(t, uint64(1), st.Stats().Pipelines, "32 blocks stored in one pipeline")

	keys := make([]tier.Key, 32)
	dsts := make([][]byte, 32)
	for i := range keys {
		keys[i], dsts[i] = key(i), make([]byte, bs)
	}
	_, err := m.Load(keys, dsts)
	require.NoError(t, err)
	d := drain(t, m, 1)[0]
	require.True(t, d.OK)
	for i := range keys {
		require.Equal(t, block(keys[i]), dsts[i], "block %d", i)
	}
	require.Equal(t, uint64(2), st.Stats().Pipelines, "32 blocks loaded in one pipeline")

	require.True(t, load(t, m, 5).OK)
	require.Equal(t, uint64(2), st.Stats().Pipelines, "one block goes without a pipeline")
	require.NoError(t, m.Check())
}
