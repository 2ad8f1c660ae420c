//go:build linux

package mmap_test

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// A pool of 16 blocks of 4 KiB in one mapping, pre-faulted.
func ExampleNew() {
	b, err := mmap.New(4096, 16, mmap.WithPrefault())
	if err != nil {
		fmt.Println(err)
		return
	}
	_, length := b.Span()
	fmt.Println("blocks:", b.Len(), "mapping:", length, "bytes")

	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		b.Close() // the pool did not take b
		fmt.Println(err)
		return
	}
	defer p.Close() // unmaps b: no block may be used afterwards

	h, err := p.Alloc()
	if err != nil {
		fmt.Println(err)
		return
	}
	buf, _ := p.Bytes(h)
	copy(buf, "kv")
	fmt.Println("block:", len(buf), "bytes, starts with", string(buf[:2]))
	// Output:
	// blocks: 16 mapping: 65536 bytes
	// block: 4096 bytes, starts with kv
}

// Bind a region to the first node that has CPUs, and check where the kernel
// put it. On a machine without NUMA support the bind fails, and the error
// says why.
func ExampleNodes() {
	nodes, err := mmap.Nodes()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range nodes {
		fmt.Printf("node %d: %d CPUs\n", n.ID, len(n.CPUs))
	}

	b, err := mmap.New(4096, 1024, mmap.WithNode(nodes[0].ID))
	var be *mmap.BindError
	switch {
	case errors.As(err, &be) && (be.Reason == mmap.ReasonSyscallUnavailable || be.Reason == mmap.ReasonPermissionDenied):
		fmt.Println("cannot bind here:", err)
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer b.Close()
	node, err := b.Placement()
	fmt.Println("bound to", b.Node(), "first page on", node, err)
}
