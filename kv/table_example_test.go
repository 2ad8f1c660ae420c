package kv_test

import (
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// A block table grows a sequence token by token, all or nothing.
func ExampleTable() {
	b, _ := heap.New(4096, 4)
	p, _ := pool.New(b, mailbox.New(), fifo.Policy{})
	defer p.Close()

	seq, _ := kv.NewTable(16) // 16 tokens per block
	_ = seq.Append(p, 20)     // 2 blocks
	err := seq.Append(p, 60)  // 80 tokens need 5 blocks; only 4 exist
	fmt.Println(len(seq.Handles()), seq.Tokens(), err)
	_ = seq.Release(p)
	fmt.Println(p.Stats().Live)
	// Output:
	// 2 20 pool: exhausted
	// 0
}
