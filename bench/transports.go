package bench

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// Sharded queue shapes of the trace contenders: per-handle queues of 256
// handles per worker (1024 in all, like locus-shared) drained 64 at a time;
// chunk queues of 8 chunks drained 8 at a time (the record's T-0354 path).
const (
	ShardedCapacity, ShardedBatch           = 256, 64
	ShardedChunkCapacity, ShardedChunkBatch = 8, 8
)

func checkSharded(t *sharded.Transport) error {
	st := t.Stats()
	if st.Submitted != st.Drained || st.Pending != 0 {
		return fmt.Errorf("sharded queues: submitted %d drained %d pending %d", st.Submitted, st.Drained, st.Pending)
	}
	return nil
}

func newSharded(opts ...sharded.Option) func() (*sharded.Transport, error) {
	return func() (*sharded.Transport, error) { return sharded.New(opts...) }
}

// mmapPool builds a pool on one anonymous mapping (not pre-faulted: pages
// fault in during the untimed sample pass and warm-up).
func mmapPool[T pool.Transport, P pool.ReusePolicy](t func() T, p P) func(int) (*pool.Pool[*mmap.Backing, T, P], error) {
	return func(blocks int) (*pool.Pool[*mmap.Backing, T, P], error) {
		b, err := mmap.New(BlockSize, blocks)
		if err != nil {
			return nil, err
		}
		pl, err := pool.New(b, t(), p)
		if err != nil {
			return nil, errors.Join(err, b.Close())
		}
		return pl, nil
	}
}

// The locus contenders built on the bounded transports and the mapped
// backing. Each is one table row; see also locuspool.go.

func checkShared(t *shared.Transport) error {
	st := t.Stats()
	if st.Submitted != st.Drained || st.Pending != 0 {
		return fmt.Errorf("shared queue: submitted %d drained %d pending %d", st.Submitted, st.Drained, st.Pending)
	}
	return nil
}

func newShared(capacity, batch int) func() (*shared.Transport, error) {
	return func() (*shared.Transport, error) {
		return shared.New(shared.WithCapacity(capacity), shared.WithBatch(batch))
	}
}

func init() {
	register(
		Entry{Name: "locus-shared", Group: GroupLocus,
			Doc: "heap + one shared per-handle queue (capacity 1024, batch 64) + LIFO",
			New: func() Contender {
				c := newLocusPool(heapPoolE(newShared(SharedCapacity, SharedBatch), lifo.Policy{}), false)
				c.checkT = checkShared
				return c
			}},
		Entry{Name: "locus-sharded", Group: GroupLocus,
			Doc: "heap + per-worker per-handle queues (256 handles each, batch 64) + LIFO",
			New: func() Contender {
				c := newLocusPool(heapPoolE(newSharded(sharded.WithCapacity(ShardedCapacity),
					sharded.WithBatch(ShardedBatch)), lifo.Policy{}), false)
				c.checkT = checkSharded
				return c
			}},
		Entry{Name: "locus-sharded-chunk", Group: GroupLocus,
			Doc: "heap + per-worker chunk queues (8 chunks each, batch 8) + LIFO",
			New: func() Contender {
				c := newLocusPool(heapPoolE(newSharded(sharded.WithChunks(), sharded.WithCapacity(ShardedChunkCapacity),
					sharded.WithBatch(ShardedChunkBatch)), lifo.Policy{}), false)
				c.checkT = checkSharded
				return c
			}},
		Entry{Name: "locus-mmap", Group: GroupLocus,
			Doc: "one anonymous mapping (backing/mmap, not pre-faulted) + mailbox + LIFO",
			New: func() Contender { return newLocusPool(mmapPool(mailbox.New, lifo.Policy{}), false) }},
	)
}
