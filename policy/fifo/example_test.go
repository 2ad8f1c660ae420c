package fifo_test

import (
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// FIFO hands out the block free longest (LIFO would hand out y here):
// reuse spreads over every block.
func Example() {
	b, _ := heap.New(64, 2)
	p, _ := pool.New(b, mailbox.New(), fifo.Policy{})
	defer p.Close()
	x, _ := p.Alloc()
	y, _ := p.Alloc()
	_ = p.Free(x)
	_ = p.Free(y)
	z, _ := p.Alloc()
	fmt.Println(z.Index() == x.Index())
	// Output: true
}
