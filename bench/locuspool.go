package bench

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// locusPool is a contender built from a composed locus pool. Workers free
// finished lists with one Sender.FreeChunk each; the owner drains at step
// start and step end; the touch writes through the slice AllocBytes
// returns with the handle, as the Go peers write through theirs. With inline set there are
// no workers: Dispatch frees the list on the owner (the no-handoff floor).
type locusPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy] struct {
	build  func(blocks int) (*pool.Pool[B, T, P], error)
	inline bool
	checkT func(T) error // the transport's own gates, if it has counters
	// chunked serves every multi-block allocation (a prefill) with one
	// AllocChunk instead of per-block Allocs (thread 0356's replay).
	chunked bool

	p       *pool.Pool[B, T, P]
	lists   [][]pool.Handle
	senders [Workers]*pool.Sender
	ws      workerSet
	toucher
}

func newLocusPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](
	build func(blocks int) (*pool.Pool[B, T, P], error), inline bool) *locusPool[B, T, P] {
	return &locusPool[B, T, P]{build: build, inline: inline}
}

func (c *locusPool[B, T, P]) Open(plan *Plan, touch TouchMode) error {
	p, err := c.build(poolBlocks(plan))
	if err != nil {
		return err
	}
	c.p = p
	c.setMode(touch)
	c.lists = make([][]pool.Handle, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]pool.Handle, 0, n)
	}
	if c.inline {
		c.ws.w.init()
		return nil
	}
	for w := range c.senders {
		if c.senders[w], err = p.NewSender(); err != nil {
			return errors.Join(err, p.Close())
		}
	}
	c.ws.start(c.free)
	return nil
}

// free runs on worker w.
func (c *locusPool[B, T, P]) free(w int, l int32) {
	list := c.lists[l]
	c.lists[l] = list[:0]
	// FreeChunk fails only on a closed pool; the gates then catch the
	// missing frees.
	_ = c.senders[w].FreeChunk(list)
}

func (c *locusPool[B, T, P]) Alloc(lists []int32, n int) error {
	if c.chunked && n > 1 {
		return c.allocChunks(lists, n)
	}
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

func (c *locusPool[B, T, P]) allocChunks(lists []int32, n int) error {
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

func (c *locusPool[B, T, P]) Dispatch(l, w int) error {
	if c.inline {
		list := c.lists[l]
		c.lists[l] = list[:0]
		return c.p.FreeChunk(list)
	}
	return c.ws.dispatch(l, w)
}

func (c *locusPool[B, T, P]) Drain() (int, error) { return c.p.Drain() }

func (c *locusPool[B, T, P]) Counts() (uint64, uint64) {
	st := c.p.Stats()
	return st.Allocs, st.Frees
}

func (c *locusPool[B, T, P]) freed() uint64 { return c.p.Stats().Frees }

func (c *locusPool[B, T, P]) Wait(target uint64) error {
	return c.ws.w.waitUntil(target, c.freed, c.p.Drain)
}

func (c *locusPool[B, T, P]) SetFill(v byte) { c.setFill(v) }

func (c *locusPool[B, T, P]) Check(live int) error {
	st := c.p.Stats()
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
	if c.checkT != nil {
		if err := c.checkT(c.p.Transport()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *locusPool[B, T, P]) Close() error {
	if c.p == nil {
		return nil
	}
	if !c.inline {
		c.ws.stop()
	}
	err := c.p.Close()
	c.p = nil
	c.lists = nil
	return err
}

func heapPool[T pool.Transport, P pool.ReusePolicy](t func() T, p P) func(int) (*pool.Pool[*heap.Backing, T, P], error) {
	return func(blocks int) (*pool.Pool[*heap.Backing, T, P], error) {
		b, err := heap.New(BlockSize, blocks)
		if err != nil {
			return nil, err
		}
		return pool.New(b, t(), p)
	}
}

// heapPoolE is heapPool for transports whose constructor can fail.
func heapPoolE[T pool.Transport, P pool.ReusePolicy](t func() (T, error), p P) func(int) (*pool.Pool[*heap.Backing, T, P], error) {
	return func(blocks int) (*pool.Pool[*heap.Backing, T, P], error) {
		tr, err := t()
		if err != nil {
			return nil, err
		}
		b, err := heap.New(BlockSize, blocks)
		if err != nil {
			return nil, errors.Join(err, tr.Close())
		}
		return pool.New(b, tr, p)
	}
}

func init() {
	def := func(blocks int) (*locus.DefaultPool, error) {
		return locus.Default(locus.WithBlocks(blocks), locus.WithBlockSize(BlockSize))
	}
	register(
		Entry{Name: "locus-mailbox", Group: GroupLocus,
			Doc: "locus.Default(): heap blocks, per-worker chunk mailboxes, LIFO",
			New: func() Contender { return newLocusPool(def, false) }},
		Entry{Name: "locus-inline", Group: GroupLocus,
			Doc: "locus.Default() with the owner freeing inline, no workers (the no-handoff floor)",
			New: func() Contender { return newLocusPool(def, true) }, Floor: true},
		Entry{Name: "locus-fifo", Group: GroupLocus,
			Doc: "heap + mailbox + FIFO reuse",
			New: func() Contender { return newLocusPool(heapPool(mailbox.New, fifo.Policy{}), false) }},
	)
}
