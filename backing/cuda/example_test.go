package cuda_test

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/backing/cuda"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// A pool of device blocks, a registered host tier, and one batched offload
// per step. It needs a GPU; without one, Open says why.
func Example() {
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		fmt.Println("no GPU:", err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer d.Close()

	const blockSize, blocks = 2 << 20, 64
	dev, err := d.NewBacking(blockSize, blocks)
	if err != nil {
		panic(err)
	}
	p, err := pool.New(dev, mailbox.New(), lifo.Policy{}) // the pool closes dev
	if err != nil {
		panic(err)
	}
	defer p.Close()

	host, err := mmap.New(blockSize, blocks, mmap.WithPrefault())
	if err != nil {
		panic(err)
	}
	defer host.Close()
	reg, err := d.Register(host) // once, off the serving path
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	c, err := d.NewCopier()
	if err != nil {
		panic(err)
	}
	defer c.Close()

	req := make([]pool.Handle, 8)
	if err := p.AllocChunk(req); err != nil {
		panic(err)
	}
	copies := make([]cuda.Copy, len(req))
	for i, h := range req {
		addr, err := p.DeviceAddr(h) // checks the handle
		if err != nil {
			panic(err)
		}
		copies[i] = cuda.Copy{Dev: cuda.DevicePtr(addr), Host: host.Block(i)}
	}
	job, err := c.Submit(cuda.ToHost, copies) // one call for the step
	if err != nil {
		panic(err)
	}
	var done []cuda.Job
	for len(done) == 0 { // the owner polls once per step; no goroutine
		if done, err = c.Poll(done); err != nil {
			panic(err)
		}
	}
	fmt.Println(done[0] == job, c.Path())
}
