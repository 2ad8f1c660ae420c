package lifo_test

import (
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// LIFO hands out the block freed last: its lines are likely still in cache.
func Example() {
	b, _ := heap.New(64, 2)
	p, _ := pool.New(b, mailbox.New(), lifo.Policy{})
	defer p.Close()
	x, _ := p.Alloc()
	y, _ := p.Alloc()
	_ = p.Free(x)
	_ = p.Free(y)
	z, _ := p.Alloc()
	fmt.Println(z.Index() == y.Index())
	// Output: true
}
