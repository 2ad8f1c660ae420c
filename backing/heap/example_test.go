package heap_test

import (
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// A pool over one Go-heap region: the race detector sees every block, which
// makes it the backing for race-mode tests of block hand-offs.
func Example() {
	b, err := heap.New(4096, 16) // 16 blocks of 4 KiB in one region
	if err != nil {
		panic(err)
	}
	p, err := pool.New(b, mailbox.New(), lifo.Policy{}) // the pool closes b
	if err != nil {
		panic(err)
	}
	defer p.Close()
	h, buf, _ := p.AllocBytes()
	copy(buf, "kv")
	fmt.Println(len(buf), string(buf[:2]))
	fmt.Println(p.Free(h)) // buf must not be used after this
	// Output:
	// 4096 kv
	// <nil>
}
