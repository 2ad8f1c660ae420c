package redis_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/redis"
)

// slotOf is Redis Cluster's slot of a key without a hash tag (a namespace
// has no braces): CRC-16/XMODEM of the key, modulo 16384.
func slotOf(key string) int {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// clusterNode is one master of a test cluster, for the operator's commands.
type clusterNode struct {
	addr, id string
	c        *goredis.Client
}

func clusterNodes(t *testing.T, addrs []string) []clusterNode {
	t.Helper()
	var nodes []clusterNode
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		id, err := c.ClusterMyID(context.Background()).Result()
		require.NoError(t, err)
		nodes = append(nodes, clusterNode{addr: a, id: id, c: c})
	}
	return nodes
}

// owner returns the index of the node that owns slot.
func owner(t *testing.T, nodes []clusterNode, slot int) int {
	t.Helper()
	shards, err := nodes[0].c.ClusterShards(context.Background()).Result()
	require.NoError(t, err)
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for i, n := range nodes {
				for _, sn := range sh.Nodes {
					if sn.Role == "master" && sn.ID == n.id {
						return i
					}
				}
			}
		}
	}
	t.Fatalf("no node owns slot %d", slot)
	return -1
}

// migrateSlot moves slot from nodes[from] to nodes[to] as redis-cli
// --cluster reshard does: IMPORTING on the target, MIGRATING on the
// source, the keys moved one MIGRATE at a time (pause between them, so that
// clients meet the slot half moved and get ASK), then the slot assigned to
// the target on every master (clients then get MOVED).
func migrateSlot(t *testing.T, nodes []clusterNode, slot, from, to int, pause time.Duration) {
	ctx := context.Background()
	src, dst := nodes[from], nodes[to]
	require.NoError(t, dst.c.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.id).Err())
	require.NoError(t, src.c.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.id).Err())
	time.Sleep(pause)
	host, port, err := net.SplitHostPort(dst.addr)
	require.NoError(t, err)
	for {
		keys, err := src.c.ClusterGetKeysInSlot(ctx, slot, 1).Result()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		require.NoError(t, src.c.Do(ctx, "MIGRATE", host, port, "", 0, 5000, "KEYS", keys[0]).Err())
		time.Sleep(pause)
	}
	require.NoError(t, dst.c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dst.id).Err())
	require.NoError(t, src.c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dst.id).Err())
	for i, n := range nodes {
		if i != from && i != to {
			require.NoError(t, n.c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dst.id).Err())
		}
	}
}

// Needs redis-server and redis-cli. The slots of blocks the tier holds
// move from one master to another while the tier stores and loads, one
// block at a time and pipelined: go-redis follows the ASK and MOVED
// redirects (counted in Stats.Redirects); every loaded byte is checked and
// nothing corrupt is served; every failure is counted in Stats; every
// block is served after the migration, from its new master; no goroutine
// outlives the Tier.
func TestClusterSlotMigration(t *testing.T) {
	addrs := startCluster(t)
	nodes := clusterNodes(t, addrs)
	before := runtime.NumGoroutine()
	st, err := redis.Dial(addrs, namespace(t), bs, 1024, redis.WithCluster(), redis.WithTimeout(2*time.Second))
	require.NoError(t, err)

	// 96 blocks over the three masters, stored and loaded in pipelines
	// that go-redis splits by node.
	const stored = 96
	keys, slots, srcs, gens, dsts := batch(0, stored, 1)
	failed, err := st.WriteSlots(slots, keys, 1, srcs)
	require.NoError(t, err, "failed at %d", failed)
	failed, err = st.ReadSlots(slots, keys, gens, dsts)
	require.NoError(t, err, "failed at %d", failed)
	checkBlocks(t, keys, dsts, stored)

	// Migrate the slots of the blocks master 0 holds to master 1; fresh
	// blocks of those slots are written while they move.
	moving := map[int]bool{}
	var held []tier.Key // the blocks in moving slots
	for _, k := range keys {
		if s := slotOf(st.Key(k)); owner(t, nodes, s) == 0 || moving[s] {
			moving[s] = true
			held = append(held, k)
		}
	}
	require.NotEmpty(t, moving)
	var fresh []tier.Key
	for i := 10000; len(fresh) < 48; i++ {
		if moving[slotOf(st.Key(key(i)))] {
			fresh = append(fresh, key(i))
		}
	}
	var written sync.Map // fresh keys stored at least once
	var stop atomic.Bool
	var reads, writes, readFails, writeFails atomic.Int64
	var wg sync.WaitGroup
	reader := func(seed uint64) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 1))
		const n = 8
		ks, sl, gs, ds := make([]tier.Key, n), make([]int, n), make([]uint64, n), make([][]byte, n)
		for i := range n {
			sl[i], gs[i], ds[i] = i, 1, make([]byte, bs)
		}
		for !stop.Load() {
			for i := range n {
				ks[i] = held[r.IntN(len(held))]
				if i%4 == 3 { // a fresh block, once stored
					if k := fresh[r.IntN(len(fresh))]; isWritten(&written, k) {
						ks[i] = k
					}
				}
			}
			failed, err := st.ReadSlots(sl, ks, gs, ds)
			good := n
			if err != nil {
				readFails.Add(1)
				good = failed
			}
			for i := range good {
				if !bytes.Equal(block(ks[i]), ds[i]) {
					t.Errorf("%v: wrong bytes served", ks[i])
				}
			}
			reads.Add(int64(good))
			k := held[r.IntN(len(held))]
			if err := st.ReadSlot(0, k, 1, ds[0]); err != nil {
				readFails.Add(1)
			} else if !bytes.Equal(block(k), ds[0]) {
				t.Errorf("%v: wrong bytes served", k)
			}
		}
	}
	writer := func() {
		defer wg.Done()
		for j := 0; !stop.Load(); j += 4 {
			ks := []tier.Key{fresh[j%len(fresh)], fresh[(j+1)%len(fresh)], fresh[(j+2)%len(fresh)]}
			srcs := [][]byte{block(ks[0]), block(ks[1]), block(ks[2])}
			failed, err := st.WriteSlots([]int{0, 1, 2}, ks, 1, srcs)
			if err != nil {
				writeFails.Add(1)
				ks = ks[:failed] // the writes before the failure landed
			}
			k := fresh[(j+3)%len(fresh)]
			if err := st.WriteSlot(3, k, 1, block(k)); err != nil {
				writeFails.Add(1)
			} else {
				ks = append(ks, k)
			}
			for _, k := range ks {
				written.Store(k, true)
			}
			writes.Add(int64(len(ks)))
			time.Sleep(time.Millisecond)
		}
	}
	wg.Add(3)
	go reader(1)
	go reader(2)
	go writer()
	time.Sleep(20 * time.Millisecond)
	for s := range moving {
		migrateSlot(t, nodes, s, 0, 1, 3*time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // clients still routing to master 0 get MOVED
	stop.Store(true)
	wg.Wait()

	stats := st.Stats()
	t.Logf("%d slots (%d blocks) moved; %d blocks read, %d written; %d reads and %d writes failed; stats %+v",
		len(moving), len(held), reads.Load(), writes.Load(), readFails.Load(), writeFails.Load(), stats)
	require.Positive(t, stats.Redirects, "the migration was seen")
	require.Zero(t, stats.Corrupt, "nothing corrupt")
	// Every failure a caller saw is counted (a pipeline counts each block).
	require.GreaterOrEqual(t, stats.Gone+stats.Timeouts+stats.Errors, uint64(readFails.Load()+writeFails.Load()))
	// The redirects are followed: no block was refused or lost.
	require.Zero(t, readFails.Load()+writeFails.Load())
	require.Positive(t, writes.Load())

	// After the migration: every block, served from its new master.
	for s := range moving {
		require.Equal(t, 1, owner(t, nodes, s))
		n, err := nodes[0].c.ClusterCountKeysInSlot(context.Background(), s).Result()
		require.NoError(t, err)
		require.Zero(t, n, "slot %d left keys on its old master", s)
	}
	all := append([]tier.Key(nil), keys...)
	for _, k := range fresh {
		if isWritten(&written, k) {
			all = append(all, k)
		}
	}
	_, slots, _, gens, dsts = batch(0, len(all), 1)
	failed, err = st.ReadSlots(slots, all, gens, dsts)
	require.NoError(t, err, "failed at %d", failed)
	checkBlocks(t, all, dsts, len(all))
	require.Zero(t, st.Stats().Corrupt)

	require.NoError(t, st.Close())
	for _, n := range nodes {
		_ = n.c.Close()
	}
	settle(t, before)
}

func isWritten(m *sync.Map, k tier.Key) bool { _, ok := m.Load(k); return ok }
