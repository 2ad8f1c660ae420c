package redis_test

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/redis"
)

// A remote tier shared by a fleet: every engine dials the same Redis (or
// Redis Cluster, redis.WithCluster) with the same namespace, and loads the
// blocks the others stored.
func Example() {
	srv, err := miniredis.Run() // a real deployment dials its Redis
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	const ns = "llama-3-8b:bf16:tp0:bs16" // everything that changes a block's bytes

	engine := func() *tier.Manager {
		st, err := redis.Dial([]string{srv.Addr()}, ns, 4096, 1024)
		if err != nil {
			panic(err)
		}
		m, err := tier.New(st)
		if err != nil {
			panic(err)
		}
		return m
	}
	a, b := engine(), engine()
	defer a.Close()
	defer b.Close()

	k := tier.KeyOf([]byte("block hash"), 0)
	src := make([]byte, 4096)
	copy(src, "kv")
	if _, err := a.Store([]tier.Key{k}, [][]byte{src}); err != nil {
		panic(err)
	}
	wait(a)

	// Engine b learns of the block (from a's events, or its own lookup
	// of the prefix) and stores nothing: it indexes the key as stored...
	plan, _ := b.PrepareStore([]tier.Key{k})
	_ = b.CompleteStore(plan.Job, true)
	// ...and loads a's bytes.
	dst := make([]byte, 4096)
	if _, err := b.Load([]tier.Key{k}, [][]byte{dst}); err != nil {
		panic(err)
	}
	done := wait(b)
	fmt.Println(done.OK, string(dst[:2]), a.Stats().Medium)
	// Output: true kv SHARED_STORAGE
}

func wait(m *tier.Manager) tier.Done {
	for {
		if done, _ := m.Drain(nil); len(done) > 0 {
			return done[0]
		}
	}
}
