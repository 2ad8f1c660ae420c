package bench

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/bench/internal/handwritten"
)

// locus-handwritten runs bench/internal/handwritten, the hand-written non-generic
// copy of locus-mailbox's path, through the same steps as locus-mailbox: the
// difference between the two contenders is what the generic composition
// costs.

type handwrittenPool struct {
	p       *handwritten.Pool
	lists   [][]handwritten.Handle
	senders []*handwritten.Sender
	ws      workers
	toucher
}

func (c *handwrittenPool) open(plan *Plan, touch TouchMode) error {
	c.p = handwritten.New(BlockSize, poolBlocks(plan))
	c.setMode(touch)
	c.lists = make([][]handwritten.Handle, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]handwritten.Handle, 0, n)
	}
	c.senders = make([]*handwritten.Sender, plan.Workers)
	for w := range c.senders {
		c.senders[w] = c.p.NewSender()
	}
	c.ws.start(plan.Workers, c.free)
	return nil
}

func (c *handwrittenPool) free(w int, l int32) int {
	list := c.lists[l]
	c.lists[l] = list[:0]
	_ = c.senders[w].FreeChunk(list)
	return len(list)
}

func (c *handwrittenPool) alloc(lists []int32, n int) error {
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

func (c *handwrittenPool) dispatch(l int32, w int) error {
	return c.ws.dispatch(l, w, len(c.lists[l]))
}
func (c *handwrittenPool) drain() (int, error) { return c.p.Drain(), nil }

func (c *handwrittenPool) barrier() error {
	if err := c.ws.wait(nil); err != nil {
		return err
	}
	c.p.Drain()
	return nil
}

func (c *handwrittenPool) counts() (uint64, uint64) {
	n := c.p.Counts()
	return n.Allocs, n.Frees
}

func (c *handwrittenPool) setFill(v byte) { c.toucher.setFill(v) }

func (c *handwrittenPool) check(live int) error {
	var errs []error
	n := c.p.Counts()
	if n.Submitted != n.Drained {
		errs = append(errs, fmt.Errorf("submitted %d != drained %d", n.Submitted, n.Drained))
	}
	if n.Rejected != 0 {
		errs = append(errs, fmt.Errorf("%d handles rejected", n.Rejected))
	}
	if got := n.Allocs - n.Frees; got != uint64(live) {
		errs = append(errs, fmt.Errorf("live %d, want %d", got, live))
	}
	return errors.Join(errs...)
}

func (c *handwrittenPool) close() error {
	if c.p == nil {
		return nil
	}
	c.ws.stop()
	c.p.Close()
	c.p = nil
	c.lists = nil
	return nil
}

func init() {
	register(Entry{Name: "locus-handwritten", Group: GroupLocus, Checked: true,
		Doc: "hand-written non-generic copy of locus-mailbox's path (bench/internal/handwritten: what generics cost)",
		new: func() contender { return new(handwrittenPool) }})
}
