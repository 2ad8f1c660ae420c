package bench

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/internal/handwritten"
)

// locus-handwritten runs internal/handwritten, the hand-written non-generic
// copy of locus-mailbox's path, through the same steps as locus-mailbox: the
// difference between the two contenders is what the generic composition
// costs.

type handwrittenPool struct {
	p       *handwritten.Pool
	lists   [][]handwritten.Handle
	senders [Workers]*handwritten.Sender
	ws      workerSet
	toucher
}

func (c *handwrittenPool) Open(plan *Plan, touch TouchMode) error {
	c.p = handwritten.New(BlockSize, poolBlocks(plan))
	c.setMode(touch)
	c.lists = make([][]handwritten.Handle, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]handwritten.Handle, 0, n)
	}
	for w := range c.senders {
		c.senders[w] = c.p.NewSender()
	}
	c.ws.start(c.free)
	return nil
}

func (c *handwrittenPool) free(w int, l int32) {
	list := c.lists[l]
	c.lists[l] = list[:0]
	_ = c.senders[w].FreeChunk(list)
}

func (c *handwrittenPool) Alloc(lists []int32, n int) error {
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

func (c *handwrittenPool) Dispatch(l, w int) error { return c.ws.dispatch(l, w) }
func (c *handwrittenPool) Drain() (int, error)     { return c.p.Drain(), nil }
func (c *handwrittenPool) Counts() (uint64, uint64) {
	n := c.p.Counts()
	return n.Allocs, n.Frees
}
func (c *handwrittenPool) freed() uint64 { return c.p.Frees() }
func (c *handwrittenPool) Wait(target uint64) error {
	return c.ws.w.waitUntil(target, c.freed, c.Drain)
}
func (c *handwrittenPool) SetFill(v byte) { c.setFill(v) }

func (c *handwrittenPool) Check(live int) error {
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

func (c *handwrittenPool) Close() error {
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
	register(Entry{Name: "locus-handwritten", Group: GroupLocus,
		Doc: "hand-written non-generic copy of locus-mailbox's path (shows what generics cost)",
		New: func() Contender { return new(handwrittenPool) }})
}
