package redis

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
)

// Tier is a tier.BatchStorage: a Manager over it moves the blocks of a job
// of more than one block with WriteSlots and ReadSlots.
var _ tier.BatchStorage = (*Tier)(nil)

// checkBatch checks a batch's arguments as WriteSlot and ReadSlot check
// one block's; it returns the index of the first bad one.
func (t *Tier) checkBatch(slots []int, keys []tier.Key, n int, bufs [][]byte) (int, error) {
	if t == nil || t.c == nil || t.closed.Load() {
		return 0, pool.ErrClosed
	}
	if len(keys) != len(slots) || n != len(slots) || len(bufs) != len(slots) {
		return 0, fmt.Errorf("%w: redis: %d slots, %d keys, %d generations, %d buffers", pool.ErrInvalidArgument, len(slots), len(keys), n, len(bufs))
	}
	for i, s := range slots {
		if err := tier.CheckSlot("redis", s, t.slots, t.bs, bufs[i]); err != nil {
			return i, fmt.Errorf("block %d: %w", i, err)
		}
	}
	return -1, nil
}

// WriteSlots stores the blocks srcs of keys, stamped with generation gen,
// as WriteSlot does, in pipelines of at most WithPipeline blocks: one
// round trip per pipeline, each bounded by WithTimeout. It stops at the
// first pipeline with a failed write; later pipelines are not sent.
//
// Use it for a job of several blocks; for one block WriteSlot does the
// same with less bookkeeping. On a cluster, a pipeline is split by node
// and the parts go at once; MOVED and ASK answers are followed per block.
// It fails with an error wrapping pool.ErrInvalidArgument (nothing sent)
// when the slices disagree in length, a slot or buffer is bad, or gen is 0.
func (t *Tier) WriteSlots(slots []int, keys []tier.Key, gen uint64, srcs [][]byte) (int, error) {
	if i, err := t.checkBatch(slots, keys, len(slots), srcs); err != nil {
		return i, err
	}
	if gen == 0 {
		return 0, fmt.Errorf("%w: redis: generation 0", pool.ErrInvalidArgument)
	}
	n := len(slots)
	if t.cfg.pipeline == 1 {
		for i := range n {
			if err := t.WriteSlot(slots[i], keys[i], gen, srcs[i]); err != nil {
				return i, err
			}
		}
		return -1, nil
	}
	if n == 0 {
		return -1, nil
	}
	step := min(n, t.cfg.pipeline)
	bufs := make([]*[]byte, step)
	for i := range bufs {
		bufs[i] = t.bufs.Get().(*[]byte)
	}
	defer func() {
		for _, bp := range bufs {
			t.bufs.Put(bp)
		}
	}()
	cmds := make([]*goredis.StatusCmd, step)
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		t.pipeline(func(ctx context.Context, p goredis.Pipeliner) {
			for i := lo; i < hi; i++ {
				v := t.value(*bufs[i-lo], keys[i], gen, srcs[i])
				cmds[i-lo] = p.Set(ctx, t.Key(keys[i]), v, t.cfg.ttl)
			}
		})
		failed, ferr := -1, error(nil)
		for i := lo; i < hi; i++ {
			if err := cmds[i-lo].Err(); err != nil {
				err = t.fail(err)
				if failed < 0 {
					failed, ferr = i, err
				}
				continue
			}
			t.writes.Add(1)
		}
		if failed >= 0 {
			return failed, ferr
		}
	}
	return -1, nil
}

// ReadSlots reads the blocks of keys into dsts, as ReadSlot does (each
// block checked: key, length, checksums, and this Tier's generation
// gens[i]), in pipelines of at most WithPipeline blocks: one round trip per
// pipeline, each bounded by WithTimeout. It stops at the first pipeline
// with a block that failed; later pipelines are not sent. Every block of a
// pipeline is counted in Stats (Reads, Gone, Corrupt, Timeouts, Errors).
//
// Use it for a job of several blocks; for one block ReadSlot does the same
// with less bookkeeping. A failed block's dst, and every dst after the
// first failed block, holds garbage. It fails with an error wrapping
// pool.ErrInvalidArgument (nothing sent) when the slices disagree in
// length or a slot or buffer is bad.
func (t *Tier) ReadSlots(slots []int, keys []tier.Key, gens []uint64, dsts [][]byte) (int, error) {
	if i, err := t.checkBatch(slots, keys, len(gens), dsts); err != nil {
		return i, err
	}
	n := len(slots)
	if t.cfg.pipeline == 1 {
		for i := range n {
			if err := t.ReadSlot(slots[i], keys[i], gens[i], dsts[i]); err != nil {
				return i, err
			}
		}
		return -1, nil
	}
	if n == 0 {
		return -1, nil
	}
	step := min(n, t.cfg.pipeline)
	cmds := make([]*goredis.StringCmd, step)
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		t.pipeline(func(ctx context.Context, p goredis.Pipeliner) {
			for i := lo; i < hi; i++ {
				cmds[i-lo] = p.Get(ctx, t.Key(keys[i]))
			}
		})
		failed, ferr := -1, error(nil)
		for i := lo; i < hi; i++ {
			v, err := cmds[i-lo].Bytes()
			if err = t.serve(keys[i], gens[i], v, err, dsts[i]); err != nil && failed < 0 {
				failed, ferr = i, err
			}
		}
		if failed >= 0 {
			return failed, ferr
		}
	}
	return -1, nil
}

// pipeline sends the commands queue adds as one pipeline, one round trip
// bounded by WithTimeout, and counts it. The commands carry their results
// and errors.
func (t *Tier) pipeline(queue func(ctx context.Context, p goredis.Pipeliner)) {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.timeout)
	_, _ = t.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		queue(ctx, p)
		return nil
	})
	cancel()
	t.pipes.Add(1)
}

// redirectHook counts, on a cluster's node clients, the commands answered
// with MOVED or ASK (go-redis follows them).
type redirectHook struct{ n *atomic.Uint64 }

func (redirectHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h redirectHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if redirected(err) {
			h.n.Add(1)
		}
		return err
	}
}

func (h redirectHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if redirected(c.Err()) {
				h.n.Add(1)
			}
		}
		return err
	}
}

func redirected(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ")
}
