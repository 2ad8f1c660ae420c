package conformance_test

import (
	"fmt"
	"sync"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
)

// lockedTransport is a third party's transport: every producer's chunks go
// into one mutex-guarded queue. It is slower than a mailbox under many
// producers, and correct, which is what the suite checks.
type lockedTransport struct {
	mu     sync.Mutex
	queued [][]pool.Handle // chunks in the order they were sent
	spare  [][]pool.Handle // drained chunks, for reuse: Send allocates nothing in steady state
	closed bool
}

type lockedProducer struct {
	t      *lockedTransport
	closed bool // owned by the producer's goroutine
}

func (t *lockedTransport) NewProducer() (pool.Producer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, pool.ErrClosed
	}
	return &lockedProducer{t: t}, nil
}

func (p *lockedProducer) Send(chunk []pool.Handle) error {
	if p.closed {
		return pool.ErrClosed
	}
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return pool.ErrClosed
	}
	if len(chunk) == 0 {
		return nil
	}
	var c []pool.Handle
	if n := len(t.spare); n > 0 {
		c, t.spare = t.spare[n-1][:0], t.spare[:n-1]
	}
	t.queued = append(t.queued, append(c, chunk...))
	return nil
}

// Close retires the producer; what it sent stays queued.
func (p *lockedProducer) Close() error {
	p.closed = true
	return nil
}

func (t *lockedTransport) Drain(sink *pool.Sink) {
	t.mu.Lock()
	q := t.queued
	t.queued = nil
	t.mu.Unlock()
	for _, c := range q {
		sink.Put(c)
	}
	t.mu.Lock()
	t.spare = append(t.spare, q...)
	if t.queued == nil {
		t.queued = q[:0] // keep the queue's array too
	}
	t.mu.Unlock()
}

func (t *lockedTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed, t.queued = true, nil
	return nil
}

// Run the transport suite over a transport of your own: CheckTransport
// outside go test, TestTransport inside it.
func ExampleCheckTransport_thirdParty() {
	err := conformance.CheckTransport(func() (pool.Transport, error) { return &lockedTransport{}, nil })
	fmt.Println(err)
	// Output: <nil>
}
