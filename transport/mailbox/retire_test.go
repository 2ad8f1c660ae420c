package mailbox_test

import (
	"fmt"
	"testing"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/mailbox"
)

// subject describes the mailbox to the checks the transports share. It
// keeps no counters; Boxes shows the mailboxes it keeps.
var subject = transporttest.Subject{
	New:    func() (pool.Transport, error) { return mailbox.New(), nil },
	Queues: func(tr pool.Transport) int { return mailbox.Boxes(tr.(*mailbox.Transport)) },
}

// scale returns n, or n/4 under the race detector.
func scale(n int) int {
	if raceEnabled {
		return max(n/4, 1)
	}
	return n
}

// TestRetire: thousands of producers made, used and closed one after
// another, drains between them: every handle is delivered once and in
// order, a closed producer refuses to send, and once drained the transport
// keeps no mailbox.
func TestRetire(t *testing.T) {
	if err := transporttest.Retire(subject, scale(5000)); err != nil {
		t.Fatal(err)
	}
}

// TestRetireRacing: producers made, used and closed on four goroutines while
// the owner drains: exactly once, in order, and no mailbox kept at the end.
func TestRetireRacing(t *testing.T) {
	if err := transporttest.RetireRacing(subject, 4, scale(1000)); err != nil {
		t.Fatal(err)
	}
}

// TestManyProducers: producers registered while the owner drains send
// chunks of every size: exactly once, in order.
func TestManyProducers(t *testing.T) {
	if err := transporttest.ManyProducers(subject, 16, scale(400)); err != nil {
		t.Fatal(err)
	}
}

// TestCloseRace closes the transport while producers send, register and
// retire and the owner drains.
func TestCloseRace(t *testing.T) {
	if err := transporttest.CloseRace(subject, 4); err != nil {
		t.Fatal(err)
	}
}

// TestPool frees blocks of a real pool through the mailbox, with senders per
// worker and per request; the closed ones' mailboxes are forgotten.
func TestPool(t *testing.T) {
	if err := transporttest.Pool(subject, scale(400)); err != nil {
		t.Fatal(err)
	}
}

// TestRetireDrainsFirst: a closed producer's chunks are delivered by the
// next Drain, which forgets its mailbox; the other mailboxes keep their
// order.
func TestRetireDrainsFirst(t *testing.T) {
	tr := mailbox.New()
	var prods []pool.Producer
	for p := range 4 {
		prod, err := tr.NewProducer()
		must(t, err)
		must(t, prod.Send(transporttest.Seq(p, 0, 2)))
		prods = append(prods, prod)
	}
	must(t, prods[1].Close())
	must(t, prods[2].Close())
	if n := mailbox.Boxes(tr); n != 4 {
		t.Fatalf("%d mailboxes before the drain, want 4", n)
	}
	r := transporttest.NewRecorder()
	tr.Drain(r.Sink)
	must(t, transporttest.CheckDelivery(r.Got, []int{2, 2, 2, 2}))
	if n := mailbox.Boxes(tr); n != 2 {
		t.Fatalf("%d mailboxes after the drain, want 2", n)
	}
	must(t, prods[3].Send(transporttest.Seq(3, 2, 3)))
	must(t, prods[0].Send(transporttest.Seq(0, 2, 3)))
	r.Got = r.Got[:0]
	tr.Drain(r.Sink)
	must(t, r.Want([]pool.Handle{transporttest.Handle(0, 2), transporttest.Handle(3, 2)}))
}

// TestForgetAllocs counts the allocations of the Drain that forgets 100
// retired mailboxes.
func TestForgetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race runtime allocates")
	}

	n, err := transporttest.ForgetAllocs(subject, 100)
	must(t, err)
	if n != 0 {
		t.Fatalf("the Drain that forgets 100 retired mailboxes made %d allocations, want 0", n)
	}
}

// BenchmarkDrainIdle measures an idle Drain after 5000 producers were made,
// used once and dropped: closed (retired=true), their mailboxes are
// forgotten; left open, every later Drain still visits them.
//
//	go test ./transport/mailbox -run '^$' -bench BenchmarkDrainIdle -count 6 | benchstat -col /retired -
func BenchmarkDrainIdle(b *testing.B) {
	for _, retired := range []bool{false, true} {
		b.Run(fmt.Sprintf("retired=%v", retired), func(b *testing.B) {
			transporttest.DrainIdle(b, mailbox.New(), retired)
		})
	}
}
