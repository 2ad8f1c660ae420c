package redis_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/redis"
)

const bs = 4096

func key(i int) tier.Key { return tier.KeyOf([]byte("redis-block-"+strconv.Itoa(i)), 0) }

func block(k tier.Key) []byte {
	b := make([]byte, bs)
	for i := range b {
		b[i] = k.Hash[i%32] + byte(i/7)
	}
	return b
}

func dial(t *testing.T, addrs []string, slots int, opts ...redis.Option) *redis.Tier {
	t.Helper()
	st, err := redis.Dial(addrs, namespace(t), bs, slots, opts...)
	require.NoError(t, err)
	return st
}

func manager(t *testing.T, st tier.Storage) *tier.Manager {
	t.Helper()
	m, err := tier.New(st, tier.WithWorkers(4))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// drain waits for n jobs, failing the test past a bound far above every
// timeout: no job may wedge.
func drain(t *testing.T, m *tier.Manager, n int) []tier.Done {
	t.Helper()
	var all []tier.Done
	deadline := time.Now().Add(10 * time.Second)
	for len(all) < n {
		done, err := m.Drain(nil)
		require.NoError(t, err)
		all = append(all, done...)
		require.True(t, time.Now().Before(deadline), "jobs wedged: %d of %d done", len(all), n)
		if len(done) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return all
}

// store stores blocks lo..hi-1 and waits for the stores.
func store(t *testing.T, m *tier.Manager, lo, hi int) []tier.Done {
	t.Helper()
	var keys []tier.Key
	var srcs [][]byte
	for i := lo; i < hi; i++ {
		keys = append(keys, key(i))
		srcs = append(srcs, block(key(i)))
	}
	plan, err := m.Store(keys, srcs)
	require.NoError(t, err)
	if plan.Job.IsZero() {
		return nil
	}
	return drain(t, m, 1)
}

// load loads block i alone; it returns the job's result, and checks the
// bytes of a successful load.
func load(t *testing.T, m *tier.Manager, i int) tier.Done {
	t.Helper()
	dst := make([]byte, bs)
	_, err := m.Load([]tier.Key{key(i)}, [][]byte{dst})
	require.NoError(t, err)
	d := drain(t, m, 1)[0]
	if d.OK {
		require.True(t, bytes.Equal(block(key(i)), dst), "block %d: a load served wrong bytes", i)
	}
	return d
}

// testConformance runs the tier suite over tiers of 32 blocks (two
// workers) on the Redis at addrs.
func testConformance(t *testing.T, addrs []string, opts ...redis.Option) {
	t.Helper()
	conformance.TestTier(t, func(t *testing.T) *tier.Manager {
		m, err := tier.New(dial(t, addrs, 32, opts...), tier.WithWorkers(2))
		require.NoError(t, err)
		return m
	})
}

// The tier suite, on miniredis (always), a real redis-server, and a
// three-master Redis Cluster.
func TestConformanceMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	testConformance(t, []string{mr.Addr()})
}

func TestConformanceServer(t *testing.T) {
	s := startServer(t)
	testConformance(t, []string{s.addr()})
}

func TestConformanceCluster(t *testing.T) {
	addrs := startCluster(t)
	testConformance(t, addrs, redis.WithCluster())
	// The blocks are spread over the three masters.
	st := dial(t, addrs, 64, redis.WithCluster())
	defer st.Close()
	require.NoError(t, st.Ping())
	m := manager(t, st)
	store(t, m, 0, 60)
	c := st.Client().(*goredis.ClusterClient)
	var masters atomic.Int32 // ForEachMaster runs on a goroutine per master
	require.NoError(t, c.ForEachMaster(context.Background(), func(ctx context.Context, n *goredis.Client) error {
		keys, err := n.Keys(ctx, st.Namespace()+":*").Result()
		if len(keys) > 0 {
			masters.Add(1)
		}
		return err
	}))
	require.Equal(t, int32(3), masters.Load())
	for i := range 60 {
		require.True(t, load(t, m, i).OK)
	}
}

// Whatever the server holds under a block's key, only that block, intact,
// is served: everything else is refused with tier.ErrCorrupt.
func TestValuesChecked(t *testing.T) {
	mr := miniredis.RunT(t)
	st := dial(t, []string{mr.Addr()}, 8)
	defer st.Close()
	k := key(1)
	require.NoError(t, st.WriteSlot(0, k, 7, block(k)))
	good, err := mr.Get(st.Key(k))
	require.NoError(t, err)
	dst := make([]byte, bs)
	require.NoError(t, st.ReadSlot(0, k, 7, dst))
	require.Equal(t, block(k), dst)

	flip := func(off int) string {
		b := []byte(good)
		b[off] ^= 0x40
		return string(b)
	}
	other := dial(t, []string{mr.Addr()}, 8) // another engine of the fleet
	defer other.Close()
	require.NoError(t, other.WriteSlot(0, key(2), 9, block(key(2))))
	foreign, err := mr.Get(other.Key(key(2)))
	require.NoError(t, err)

	for _, c := range []struct {
		name  string
		value string // "" deletes the key
		gen   uint64
		err   error // nil: served
	}{
		{"intact", good, 7, nil},
		{"stale generation", good, 8, tier.ErrCorrupt},
		{"gone", "", 7, redis.ErrGone},
		{"truncated payload", good[:len(good)-1], 7, tier.ErrCorrupt},
		{"extra byte", good + "x", 7, tier.ErrCorrupt},
		{"short header", good[:10], 7, tier.ErrCorrupt},
		{"empty", "\x00", 7, tier.ErrCorrupt},
		{"payload bit", flip(redis.HeaderSize + 100), 7, tier.ErrCorrupt},
		{"header bit", flip(30), 7, tier.ErrCorrupt},
		{"magic", flip(0), 7, tier.ErrCorrupt},
		{"another key's value", foreign, 7, tier.ErrCorrupt},
		{"not ours", "some other program's value", 7, tier.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.value == "" {
				mr.Del(st.Key(k))
			} else {
				require.NoError(t, mr.Set(st.Key(k), c.value))
			}
			err := st.ReadSlot(0, k, c.gen, dst)
			if c.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.err)
			require.ErrorIs(t, err, tier.ErrCorrupt, "the Manager drops the block")
		})
	}
	st2 := st.Stats()
	require.Equal(t, uint64(1), st2.Gone)
	require.Equal(t, uint64(10), st2.Corrupt)

	// A block another engine stored under the same key (same namespace)
	// is the same block: served, and counted as foreign.
	require.NoError(t, other.Close())
	peer, err := redis.Dial([]string{mr.Addr()}, st.Namespace(), bs, 8)
	require.NoError(t, err)
	defer peer.Close()
	require.NoError(t, peer.WriteSlot(3, k, 99, block(k)))
	require.NoError(t, st.ReadSlot(0, k, 7, dst))
	require.Equal(t, block(k), dst)
	require.Equal(t, uint64(1), st.Stats().Foreign)
}

// A stalled server (SIGSTOP) costs a call its timeout, never more; the
// Manager's jobs fail and nothing wedges; once the server runs again, so
// does the tier.
func TestServerStalled(t *testing.T) {
	s := startServer(t)
	const timeout = 100 * time.Millisecond
	st := dial(t, []string{s.addr()}, 64, redis.WithTimeout(timeout))
	m := manager(t, st)
	require.True(t, store(t, m, 0, 8)[0].OK)

	s.stop()
	began := time.Now()
	d := load(t, m, 0)
	require.False(t, d.OK)
	done := store(t, m, 8, 16)
	require.False(t, done[0].OK)
	took := time.Since(began)
	t.Logf("a load and a store of 8 blocks against a stalled server: %v", took)
	require.Less(t, took, 20*timeout)
	require.Positive(t, st.Stats().Timeouts)
	require.Equal(t, tier.Miss, m.Lookup([]tier.Key{key(0)}, nil)[0], "the block that failed is dropped")
	require.Equal(t, tier.Hit, m.Lookup([]tier.Key{key(1)}, nil)[0], "the others are kept")

	s.cont()
	require.Eventually(t, func() bool { return st.Ping() == nil }, 5*time.Second, 10*time.Millisecond)
	require.True(t, load(t, m, 1).OK)
	require.True(t, store(t, m, 16, 24)[0].OK)
	require.True(t, load(t, m, 20).OK)
}

// A killed server fails calls at once; restarted empty, its blocks are
// gone: misses that the Manager drops, not errors that stay; the client
// reconnects and new blocks are stored and served.
func TestServerKilledAndRestarted(t *testing.T) {
	s := startServer(t)
	st := dial(t, []string{s.addr()}, 64, redis.WithTimeout(200*time.Millisecond))
	m := manager(t, st)
	require.True(t, store(t, m, 0, 8)[0].OK)
	require.True(t, load(t, m, 0).OK)

	s.kill()
	d := load(t, m, 1)
	require.False(t, d.OK)
	require.Positive(t, st.Stats().Errors+st.Stats().Timeouts, "counted as unavailable")
	require.Zero(t, st.Stats().Gone)

	s.restart()                                    // empty: no persistence
	for _, i := range []int{0, 2, 3, 4, 5, 6, 7} { // 1 was dropped when its load failed
		d := load(t, m, i)
		require.False(t, d.OK)
		require.Equal(t, tier.Miss, m.Lookup([]tier.Key{key(i)}, nil)[0])
	}
	require.Equal(t, uint64(7), st.Stats().Gone)
	require.True(t, store(t, m, 0, 8)[0].OK, "stored again after the restart")
	for i := range 8 {
		require.True(t, load(t, m, i).OK)
	}
	require.Zero(t, st.Stats().Corrupt)
}

// Redis's own maxmemory evicts blocks behind the Manager's back: their
// loads fail as gone, the rest are served intact.
func TestMaxmemoryEviction(t *testing.T) {
	s := startServer(t, "--maxmemory", "1mb", "--maxmemory-policy", "allkeys-lru")
	st := dial(t, []string{s.addr()}, 512)
	m := manager(t, st)
	const n = 400 // 1.6 MiB of blocks
	for lo := 0; lo < n; lo += 50 {
		store(t, m, lo, lo+50)
	}
	served, gone := 0, 0
	for i := range n {
		d := load(t, m, i)
		if d.OK {
			served++
			continue
		}
		gone++
	}
	t.Logf("%d served, %d evicted by Redis", served, gone)
	require.Positive(t, gone)
	require.Positive(t, served)
	require.Equal(t, uint64(gone), st.Stats().Gone)
	require.Zero(t, st.Stats().Corrupt)
}

// WithTTL makes Redis expire blocks.
func TestTTL(t *testing.T) {
	mr := miniredis.RunT(t)
	st := dial(t, []string{mr.Addr()}, 8, redis.WithTTL(time.Second))
	defer st.Close()
	require.NoError(t, st.WriteSlot(0, key(0), 1, block(key(0))))
	require.Equal(t, time.Second, mr.TTL(st.Key(key(0))))
	mr.FastForward(2 * time.Second)
	require.ErrorIs(t, st.ReadSlot(0, key(0), 1, make([]byte, bs)), redis.ErrGone)
}

func TestDialRejects(t *testing.T) {
	for _, c := range []struct {
		name  string
		addrs []string
		ns    string
		bs    int
		slots int
		opts  []redis.Option
	}{
		{"no address", nil, "ns", bs, 8, nil},
		{"bad address", []string{"localhost"}, "ns", bs, 8, nil},
		{"no namespace", []string{"127.0.0.1:1"}, "", bs, 8, nil},
		{"block size", []string{"127.0.0.1:1"}, "ns", 0, 8, nil},
		{"slots", []string{"127.0.0.1:1"}, "ns", bs, 0, nil},
		{"timeout", []string{"127.0.0.1:1"}, "ns", bs, 8, []redis.Option{redis.WithTimeout(0)}},
		{"ttl", []string{"127.0.0.1:1"}, "ns", bs, 8, []redis.Option{redis.WithTTL(-1)}},
		{"medium", []string{"127.0.0.1:1"}, "ns", bs, 8, []redis.Option{redis.WithMedium("")}},
		{"nil option", []string{"127.0.0.1:1"}, "ns", bs, 8, []redis.Option{nil}},
		{"hash tag", []string{"127.0.0.1:1"}, "{model}", bs, 8, nil},
		{"pipeline", []string{"127.0.0.1:1"}, "ns", bs, 8, []redis.Option{redis.WithPipeline(0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := redis.Dial(c.addrs, c.ns, c.bs, c.slots, c.opts...)
			require.ErrorIs(t, err, pool.ErrInvalidConfig)
			require.Nil(t, st)
		})
	}
	_, err := redis.New(nil, "ns", bs, 8)
	require.ErrorIs(t, err, pool.ErrInvalidConfig)
}

// Bad arguments, a closed or nil Tier: errors, never a panic.
func TestMisuse(t *testing.T) {
	mr := miniredis.RunT(t)
	st := dial(t, []string{mr.Addr()}, 8)
	buf := make([]byte, bs)
	require.ErrorIs(t, st.WriteSlot(8, key(0), 1, buf), pool.ErrInvalidArgument)
	require.ErrorIs(t, st.WriteSlot(-1, key(0), 1, buf), pool.ErrInvalidArgument)
	require.ErrorIs(t, st.WriteSlot(0, key(0), 1, buf[:1]), pool.ErrInvalidArgument)
	require.ErrorIs(t, st.WriteSlot(0, key(0), 0, buf), pool.ErrInvalidArgument)
	require.ErrorIs(t, st.ReadSlot(0, key(0), 1, nil), pool.ErrInvalidArgument)
	require.NoError(t, st.Close())
	require.ErrorIs(t, st.Close(), pool.ErrClosed)
	require.ErrorIs(t, st.WriteSlot(0, key(0), 1, buf), pool.ErrClosed)
	require.ErrorIs(t, st.ReadSlot(0, key(0), 1, buf), pool.ErrClosed)
	require.ErrorIs(t, st.Ping(), pool.ErrClosed)

	var nilTier *redis.Tier
	require.ErrorIs(t, nilTier.Close(), pool.ErrClosed)
	require.ErrorIs(t, nilTier.WriteSlot(0, key(0), 1, buf), pool.ErrClosed)
	require.ErrorIs(t, nilTier.ReadSlot(0, key(0), 1, buf), pool.ErrClosed)
	require.ErrorIs(t, nilTier.Reset(1), pool.ErrClosed)
	require.Equal(t, redis.Stats{}, nilTier.Stats())
	require.True(t, errors.Is(nilTier.Ping(), pool.ErrClosed))
}
