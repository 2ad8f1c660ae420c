package classes_test

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/sharded"
)

// An allocation takes a block of the smallest class that holds it.
func Example() {
	c, err := classes.Default([]classes.Class{{Size: 4096, Blocks: 64}, {Size: 16384, Blocks: 16}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	small, _ := c.Alloc(1000)
	h, buf, _ := c.AllocBytes(6000)
	copy(buf, "kv")
	fmt.Println(small.Class(), h.Class(), len(buf))

	_, err = c.Alloc(20000)
	fmt.Println(errors.Is(err, classes.ErrTooLarge))

	st := c.Stats()
	fmt.Printf("requested %d of %d bytes handed out: %.0f%% internal fragmentation\n",
		st.Requested(), st.HandedOut(), 100*st.InternalFragmentation())
	_ = c.Free(small)
	_ = c.Free(h)
	// Output:
	// 0 1 16384
	// true
	// requested 7000 of 20480 bytes handed out: 66% internal fragmentation
}

// Split a byte budget among classes, weighted by the bytes each should hold.
func ExampleSplit() {
	cs, err := classes.Split(64<<20, []int{4096, 65536, 1 << 20}, []int{1, 2, 1})
	if err != nil {
		panic(err)
	}
	for _, c := range cs {
		fmt.Printf("%d blocks of %d bytes\n", c.Blocks, c.Size)
	}
	// Output:
	// 4096 blocks of 4096 bytes
	// 512 blocks of 65536 bytes
	// 16 blocks of 1048576 bytes
}

// A worker frees a finished request's blocks, of any classes, with one
// sender; the owner drains every class once per step.
func ExampleSender() {
	c, _ := classes.Default([]classes.Class{{Size: 64, Blocks: 8}, {Size: 512, Blocks: 8}})
	defer c.Close()

	var request []classes.Handle
	for _, n := range []int{10, 300, 64, 500} {
		h, _ := c.Alloc(n)
		request = append(request, h)
	}
	s, _ := c.NewSender()
	done := make(chan error)
	go func() { done <- s.FreeChunk(request) }() // one chunk per class
	fmt.Println(<-done)

	n, err := c.Drain()
	st := c.Stats()
	fmt.Println(n, err, st.Live(), st.Classes[0].RemoteDrained, st.Classes[1].RemoteDrained)
	// Output:
	// <nil>
	// 4 <nil> 0 2 2
}

// A handle of one class is refused by another: altering its class index
// makes it name a block of another pool.
func ExampleHandle() {
	c, _ := classes.Default([]classes.Class{{Size: 64, Blocks: 8}, {Size: 512, Blocks: 8}})
	defer c.Close()
	h, _ := c.Alloc(10)
	data, _ := h.MarshalBinary()
	data[pool.HandleSize] = 1 // claim class 1
	var forged classes.Handle
	_ = forged.UnmarshalBinary(data)
	fmt.Println(c.Free(forged))
	fmt.Println(c.Free(h), c.Free(h))
	// Output:
	// pool: handle of another pool
	// <nil> pool: stale handle
}

// Any components work: here every class has a bounded transport and
// first-in, first-out reuse (a backing/mmap region per class works the same).
func ExampleNew() {
	c, err := classes.New([]classes.Class{{Size: 4096, Blocks: 256}, {Size: 65536, Blocks: 32}},
		func(cl classes.Class) (*heap.Backing, *sharded.Transport, fifo.Policy, error) {
			b, err := heap.New(cl.Size, cl.Blocks)
			if err != nil {
				return nil, nil, fifo.Policy{}, err
			}
			t, err := sharded.New()
			return b, t, fifo.Policy{}, err
		})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println(c.Classes())
	// Output: [{4096 256} {65536 32}]
}
