package bench

import (
	"github.com/bytedance/gopkg/lang/mcache"
	bufpool "github.com/libp2p/go-buffer-pool"
)

// Third-party modules a Go user reaches for to recycle byte buffers, used
// as their documentation shows. Both are sync.Pool size classes underneath
// (one pool per power of two); neither has handles, so neither checks a
// free: a double free hands the same buffer out twice.

// bufferPool is libp2p/go-buffer-pool: a BufferPool of its own, Get(4096)
// on the owner, Put on the workers.
type bufferPool struct {
	peerBase
	bp    *bufpool.BufferPool
	lists [][][]byte
}

func (c *bufferPool) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.bp = new(bufpool.BufferPool)
	c.lists = newLists[[]byte](plan)
	c.ws.start(plan.Workers, c.free)
	return nil
}

func (c *bufferPool) free(_ int, l int32) int {
	list := c.lists[l]
	for _, b := range list {
		c.bp.Put(b)
	}
	clear(list)
	c.lists[l] = list[:0]
	return len(list)
}

func (c *bufferPool) alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			b := c.bp.Get(BlockSize)
			c.touch(b)
			list = append(list, b)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *bufferPool) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }
func (c *bufferPool) check(live int) error          { return c.checkLive(live) }
func (c *bufferPool) close() error                  { c.ws.stop(); c.lists = nil; c.bp = nil; return nil }

// mcachePool is bytedance/gopkg's lang/mcache: the package-level
// Malloc(4096) on the owner, Free on the workers. Its buffers are not
// zeroed when first made.
type mcachePool struct {
	peerBase
	lists [][][]byte
}

func (c *mcachePool) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.lists = newLists[[]byte](plan)
	c.ws.start(plan.Workers, c.free)
	return nil
}

func (c *mcachePool) free(_ int, l int32) int {
	list := c.lists[l]
	for _, b := range list {
		mcache.Free(b)
	}
	clear(list)
	c.lists[l] = list[:0]
	return len(list)
}

func (c *mcachePool) alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			b := mcache.Malloc(BlockSize)
			c.touch(b)
			list = append(list, b)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *mcachePool) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }
func (c *mcachePool) check(live int) error          { return c.checkLive(live) }
func (c *mcachePool) close() error                  { c.ws.stop(); c.lists = nil; return nil }

func init() {
	register(
		Entry{Name: "go-buffer-pool", Group: GroupGo,
			Doc: "github.com/libp2p/go-buffer-pool BufferPool: Get(4096) / Put (sync.Pool per power of two)",
			new: func() contender { return new(bufferPool) }},
		Entry{Name: "mcache", Group: GroupGo,
			Doc: "github.com/bytedance/gopkg/lang/mcache: Malloc(4096) / Free (sync.Pool per power of two)",
			new: func() contender { return new(mcachePool) }},
	)
}
