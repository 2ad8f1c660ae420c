package bench

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// The locus contenders are written the way a user writes against a pool:
// each holds its concrete pool type (*locus.DefaultPool and the other
// compositions) and calls its methods directly in the per-block loop. What
// they share runs once per step or per list, not per block, and lives in
// locusBase, which reaches the pool through a small pool-independent view.

// Queue shapes of the bounded trace contenders: locus-shared has one
// per-handle queue of 1024 handles drained 64 at a time; locus-sharded a
// per-handle queue of 256 handles per worker (1024 in all) drained 64 at a
// time; locus-sharded-chunk a chunk queue of 8 chunks per worker drained 8
// at a time (the record's T-0354 path).
const (
	sharedCapacity, sharedBatch             = 1024, 64
	shardedCapacity, shardedBatch           = 256, 64
	shardedChunkCapacity, shardedChunkBatch = 8, 8
)

// poolView is what locusBase needs of a pool, once per step or per list.
type poolView struct {
	drain     func() (int, error)
	stats     func() pool.Stats
	freeChunk func([]pool.Handle) error // the owner's inline free
	newSender func() (*pool.Sender, error)
	close     func() error
	checkT    func() error // the transport's own gates, if it counts
	bounded   bool         // workers can block on a full queue
}

func viewOf[B pool.Backing, T pool.Transport, P pool.ReusePolicy](p *pool.Pool[B, T, P]) poolView {
	_, bounded := any(p.Transport()).(pool.BoundedTransport)
	return poolView{drain: p.Drain, stats: p.Stats, freeChunk: p.FreeChunk, newSender: p.NewSender,
		close: p.Close, bounded: bounded}
}

// locusBase is the per-list and per-step half of every locus contender:
// handle lists, senders, workers, touch and gates. Workers free a finished
// list with one Sender.FreeChunk; the owner drains at step start and step
// end and once after the end-of-trace barrier. With inline set there are no
// workers: dispatch frees the list on the owner (the no-handoff floor).
type locusBase struct {
	v       poolView
	inline  bool
	lists   [][]pool.Handle
	senders []*pool.Sender
	ws      workers
	toucher
}

func (c *locusBase) openBase(v poolView, plan *Plan, touch TouchMode) error {
	c.v = v
	c.setMode(touch)
	c.lists = make([][]pool.Handle, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]pool.Handle, 0, n)
	}
	if c.inline {
		return nil
	}
	c.senders = make([]*pool.Sender, plan.Workers)
	for w := range c.senders {
		s, err := v.newSender()
		if err != nil {
			return errors.Join(err, v.close())
		}
		c.senders[w] = s
	}
	c.ws.start(plan.Workers, c.free)
	return nil
}

// free runs on worker w.
func (c *locusBase) free(w int, l int32) int {
	list := c.lists[l]
	c.lists[l] = list[:0]
	// FreeChunk fails only on a closed pool; the gates then catch the
	// missing frees.
	_ = c.senders[w].FreeChunk(list)
	return len(list)
}

func (c *locusBase) dispatch(l int32, w int) error {
	if c.inline {
		list := c.lists[l]
		c.lists[l] = list[:0]
		return c.v.freeChunk(list)
	}
	return c.ws.dispatch(l, w, len(c.lists[l]))
}

func (c *locusBase) drain() (int, error) { return c.v.drain() }

func (c *locusBase) barrier() error {
	if c.inline {
		return nil
	}
	var drain func() (int, error)
	if c.v.bounded {
		drain = c.v.drain
	}
	if err := c.ws.wait(drain); err != nil {
		return err
	}
	// A bounded transport hands over at most a batch per queue per drain:
	// drain until one brings nothing.
	for {
		n, err := c.v.drain()
		if err != nil || n == 0 || !c.v.bounded {
			return err
		}
	}
}

func (c *locusBase) counts() (uint64, uint64) {
	st := c.v.stats()
	return st.Allocs, st.Frees
}

func (c *locusBase) check(live int) error {
	st := c.v.stats()
	var errs []error
	if st.RemoteSubmitted != st.RemoteDrained {
		errs = append(errs, fmt.Errorf("submitted %d != drained %d", st.RemoteSubmitted, st.RemoteDrained))
	}
	if st.Rejected != 0 {
		errs = append(errs, fmt.Errorf("%d handles rejected", st.Rejected))
	}
	if st.Live != live || st.Allocs-st.Frees != uint64(live) {
		errs = append(errs, fmt.Errorf("live %d (allocs %d - frees %d), want %d", st.Live, st.Allocs, st.Frees, live))
	}
	if c.v.checkT != nil {
		if err := c.v.checkT(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *locusBase) setFill(v byte) { c.toucher.setFill(v) }

func (c *locusBase) close() error {
	if c.v.close == nil {
		return nil
	}
	if !c.inline {
		c.ws.stop()
	}
	err := c.v.close()
	c.v = poolView{}
	c.lists = nil
	return err
}

// mailboxPool is locus-mailbox and locus-inline: *locus.DefaultPool.
type mailboxPool struct {
	locusBase
	p *locus.DefaultPool
}

func (c *mailboxPool) open(plan *Plan, touch TouchMode) error {
	p, err := locus.Default(locus.WithBlocks(poolBlocks(plan)), locus.WithBlockSize(BlockSize))
	if err != nil {
		return err
	}
	c.p = p
	return c.openBase(viewOf(p), plan, touch)
}

func (c *mailboxPool) alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			h, b, err := c.p.AllocBytes()
			if err != nil {
				return err
			}
			c.touch(b)
			list = append(list, h)
		}
		c.lists[l] = list
	}
	return nil
}

// allocLists is the allocation loop of the composed contenders other than
// locus-mailbox: it calls the same compiled AllocBytes as a concrete loop
// would (a pool method is compiled once per shape), so only locus-mailbox,
// the baseline, and the hand-written reference keep loops of their own.
func allocLists[B pool.Backing, T pool.Transport, P pool.ReusePolicy](c *locusBase, p *pool.Pool[B, T, P], lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			h, b, err := p.AllocBytes()
			if err != nil {
				return err
			}
			c.touch(b)
			list = append(list, h)
		}
		c.lists[l] = list
	}
	return nil
}

// allocChunkPool is locus-allocchunk (design thread 0356): the default pool
// with every multi-block allocation (a prefill) served by one AllocChunk and
// the touch written through the validated Bytes.
type allocChunkPool struct{ mailboxPool }

func (c *allocChunkPool) alloc(lists []int32, n int) error {
	if n == 1 {
		return c.mailboxPool.alloc(lists, n)
	}
	for _, l := range lists {
		list := c.lists[l]
		at := len(list)
		list = list[:at+n]
		if err := c.p.AllocChunk(list[at:]); err != nil {
			return err
		}
		if c.mode != TouchNone {
			for _, h := range list[at:] {
				b, err := c.p.Bytes(h)
				if err != nil {
					return err
				}
				c.touch(b)
			}
		}
		c.lists[l] = list
	}
	return nil
}

// fifoPool is locus-fifo: heap blocks, mailboxes, FIFO reuse.
type fifoPool struct {
	locusBase
	p *pool.Pool[*heap.Backing, *mailbox.Transport, fifo.Policy]
}

func (c *fifoPool) open(plan *Plan, touch TouchMode) error {
	b, err := heap.New(BlockSize, poolBlocks(plan))
	if err != nil {
		return err
	}
	if c.p, err = pool.New(b, mailbox.New(), fifo.Policy{}); err != nil {
		return err
	}
	return c.openBase(viewOf(c.p), plan, touch)
}

func (c *fifoPool) alloc(lists []int32, n int) error { return allocLists(&c.locusBase, c.p, lists, n) }

// mmapPool is locus-mmap: one anonymous mapping (not pre-faulted: pages
// fault in during the untimed warm-up), mailboxes, LIFO.
type mmapPool struct {
	locusBase
	p *pool.Pool[*mmap.Backing, *mailbox.Transport, lifo.Policy]
}

func (c *mmapPool) open(plan *Plan, touch TouchMode) error {
	b, err := mmap.New(BlockSize, poolBlocks(plan))
	if err != nil {
		return err
	}
	if c.p, err = pool.New(b, mailbox.New(), lifo.Policy{}); err != nil {
		return errors.Join(err, b.Close())
	}
	return c.openBase(viewOf(c.p), plan, touch)
}

func (c *mmapPool) alloc(lists []int32, n int) error { return allocLists(&c.locusBase, c.p, lists, n) }

// sharedPool is locus-shared: heap blocks, one bounded per-handle queue for
// every worker, LIFO.
type sharedPool struct {
	locusBase
	p *pool.Pool[*heap.Backing, *shared.Transport, lifo.Policy]
}

func (c *sharedPool) open(plan *Plan, touch TouchMode) error {
	t, err := shared.New(shared.WithCapacity(sharedCapacity), shared.WithBatch(sharedBatch))
	if err != nil {
		return err
	}
	b, err := heap.New(BlockSize, poolBlocks(plan))
	if err != nil {
		return errors.Join(err, t.Close())
	}
	if c.p, err = pool.New(b, t, lifo.Policy{}); err != nil {
		return err
	}
	v := viewOf(c.p)
	v.checkT = func() error { return checkShared(t) }
	return c.openBase(v, plan, touch)
}

func (c *sharedPool) alloc(lists []int32, n int) error {
	return allocLists(&c.locusBase, c.p, lists, n)
}

// shardedPool is locus-sharded and locus-sharded-chunk: heap blocks, one
// bounded queue per worker, LIFO.
type shardedPool struct {
	locusBase
	opts []sharded.Option
	p    *pool.Pool[*heap.Backing, *sharded.Transport, lifo.Policy]
}

func (c *shardedPool) open(plan *Plan, touch TouchMode) error {
	t, err := sharded.New(c.opts...)
	if err != nil {
		return err
	}
	b, err := heap.New(BlockSize, poolBlocks(plan))
	if err != nil {
		return errors.Join(err, t.Close())
	}
	if c.p, err = pool.New(b, t, lifo.Policy{}); err != nil {
		return err
	}
	v := viewOf(c.p)
	v.checkT = func() error { return checkSharded(t) }
	return c.openBase(v, plan, touch)
}

func (c *shardedPool) alloc(lists []int32, n int) error {
	return allocLists(&c.locusBase, c.p, lists, n)
}

func checkSharded(t *sharded.Transport) error {
	st := t.Stats()
	if st.Submitted != st.Drained || st.Pending != 0 {
		return fmt.Errorf("sharded queues: submitted %d drained %d pending %d", st.Submitted, st.Drained, st.Pending)
	}
	return nil
}

func checkShared(t *shared.Transport) error {
	st := t.Stats()
	if st.Submitted != st.Drained || st.Pending != 0 {
		return fmt.Errorf("shared queue: submitted %d drained %d pending %d", st.Submitted, st.Drained, st.Pending)
	}
	return nil
}

func init() {
	register(
		Entry{Name: "locus-mailbox", Group: GroupLocus, Checked: true,
			Doc: "locus.Default(): heap blocks, per-worker chunk mailboxes, LIFO",
			new: func() contender { return new(mailboxPool) }},
		Entry{Name: "locus-inline", Group: GroupLocus, Checked: true, Floor: true,
			Doc: "locus.Default() with the owner freeing inline, no workers (the no-handoff floor)",
			new: func() contender { c := new(mailboxPool); c.inline = true; return c }},
		Entry{Name: "locus-fifo", Group: GroupLocus, Checked: true,
			Doc: "heap blocks + mailboxes + FIFO reuse",
			new: func() contender { return new(fifoPool) }},
		Entry{Name: "locus-mmap", Group: GroupLocus, Checked: true,
			Doc: "one anonymous mapping (backing/mmap, not pre-faulted) + mailboxes + LIFO",
			new: func() contender { return new(mmapPool) }},
		Entry{Name: "locus-shared", Group: GroupLocus, Checked: true,
			Doc: "heap blocks + one shared per-handle queue (capacity 1024, batch 64) + LIFO",
			new: func() contender { return new(sharedPool) }},
		Entry{Name: "locus-sharded", Group: GroupLocus, Checked: true,
			Doc: "heap blocks + per-worker per-handle queues (256 handles each, batch 64) + LIFO",
			new: func() contender {
				return &shardedPool{opts: []sharded.Option{sharded.WithCapacity(shardedCapacity), sharded.WithBatch(shardedBatch)}}
			}},
		Entry{Name: "locus-sharded-chunk", Group: GroupLocus, Checked: true,
			Doc: "heap blocks + per-worker chunk queues (8 chunks each, batch 8) + LIFO",
			new: func() contender {
				return &shardedPool{opts: []sharded.Option{sharded.WithChunks(),
					sharded.WithCapacity(shardedChunkCapacity), sharded.WithBatch(shardedChunkBatch)}}
			}},
	)
	registerExtra(Entry{Name: "locus-allocchunk", Group: GroupLocus, Checked: true,
		Doc: "locus.Default() with every prefill served by one AllocChunk(16) (design thread 0356)",
		new: func() contender { return new(allocChunkPool) }})
}
