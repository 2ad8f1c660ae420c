package pool_test

import (
	"errors"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// deviceBacking is a heap backing that claims device addresses: base plus
// the block's offset.
type deviceBacking struct {
	*heap.Backing
	base uintptr
}

func (d deviceBacking) DeviceAddr(i int) uintptr { return d.base + uintptr(i*64) }

// DeviceAddr checks the handle as Bytes does and refuses a host backing.
func TestDeviceAddr(t *testing.T) {
	hb, err := heap.New(64, 4)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(deviceBacking{hb, 1 << 30}, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h0, _ := p.Alloc()
	h1, _ := p.Alloc()
	for i, h := range []pool.Handle{h0, h1} {
		if a, err := p.DeviceAddr(h); err != nil || a != 1<<30+uintptr(i*64) {
			t.Fatalf("block %d: %#x, %v", i, a, err)
		}
	}
	if err := p.Free(h1); err != nil {
		t.Fatal(err)
	}
	for _, h := range []pool.Handle{h1, {}} {
		if _, err := p.DeviceAddr(h); !errors.Is(err, pool.ErrInvalidHandle) {
			t.Errorf("DeviceAddr(%v) of a freed or zero handle: %v", h, err)
		}
	}
	host, err := heap.New(64, 4)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pool.New(host, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	hq, _ := q.Alloc()
	if _, err := q.DeviceAddr(hq); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Errorf("DeviceAddr on a host backing: %v", err)
	}
	var nilPool *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy]
	if _, err := nilPool.DeviceAddr(hq); err == nil {
		t.Error("DeviceAddr on a nil pool succeeded")
	}
}
