package mailbox_test

import (
	"sync"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

func TestConformance(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mailbox.New() })
}

func TestZeroValueIsReady(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport { return new(mailbox.Transport) })
}

// TestDeliveryOrderAcrossProducers pins the documented order: oldest first
// per producer, producers in creation order.
func TestDeliveryOrderAcrossProducers(t *testing.T) {
	tr := mailbox.New()
	a, _ := tr.NewProducer()
	b, _ := tr.NewProducer()
	h := handles(t, 4)
	must(t, b.Send(h[2:3]))
	must(t, a.Send(h[0:1]))
	must(t, b.Send(h[3:4]))
	must(t, a.Send(h[1:2]))
	var got []int
	tr.Drain(pool.NewSink(func(c []pool.Handle) {
		for _, x := range c {
			got = append(got, x.Index())
		}
	}))
	want := []int{0, 1, 2, 3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivered %v, want %v", got, want)
		}
	}
}

// TestNewProducerDuringDrain registers producers while the owner drains.
func TestNewProducerDuringDrain(t *testing.T) {
	tr := mailbox.New()
	h := handles(t, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			p, err := tr.NewProducer()
			if err != nil {
				t.Error(err)
				return
			}
			if err := p.Send(h); err != nil {
				t.Error(err)
			}
		})
	}
	got := 0
	sink := pool.NewSink(func(c []pool.Handle) { got += len(c) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		tr.Drain(sink)
	}
	tr.Drain(sink)
	if got != 8 {
		t.Fatalf("delivered %d handles, want 8", got)
	}
}

func handles(t *testing.T, n int) []pool.Handle {
	t.Helper()
	b, _ := heap.New(8, n)
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]pool.Handle, n)
	must(t, p.AllocChunk(hs))
	return hs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLongChunks sends chunks that span several nodes: they arrive whole
// and in order, and in steady state allocate nothing.
func TestLongChunks(t *testing.T) {
	tr := mailbox.New()
	prod, _ := tr.NewProducer()
	hs := handles(t, 600)
	var got []pool.Handle
	sink := pool.NewSink(func(c []pool.Handle) { got = append(got, c...) })
	for _, n := range []int{528, 1, 33, 64, 600} {
		must(t, prod.Send(hs[:n]))
		must(t, prod.Send(hs[n-1:n]))
		got = got[:0]
		tr.Drain(sink)
		if len(got) != n+1 {
			t.Fatalf("chunk of %d: delivered %d handles, want %d", n, len(got), n+1)
		}
		for i := range n {
			if got[i] != hs[i] {
				t.Fatalf("chunk of %d: handle %d is %v, want %v", n, i, got[i], hs[i])
			}
		}
		if got[n] != hs[n-1] {
			t.Fatalf("chunk of %d: the next chunk arrived out of order", n)
		}
	}
	discard := pool.NewSink(func([]pool.Handle) {})
	op := func() {
		must(t, prod.Send(hs[:528]))
		must(t, prod.Send(hs[:7]))
		tr.Drain(discard)
	}
	op()
	if a := testing.AllocsPerRun(100, op); a != 0 && !raceEnabled {
		t.Fatalf("Send of long chunks + Drain: %v allocs, want 0", a)
	}
}
