package mailbox_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/mailbox"
)

const raceEnabled = race.Enabled

// TestStress: eight goroutines make producers one after another and send
// chunks of 1 to 100 handles with each (a chunk spans up to four nodes);
// most producers are closed, every fifth is dropped open. The owner drains
// throughout. Every handle arrives exactly once, each producer's in order;
// at the end the transport keeps exactly the dropped producers' mailboxes.
// Run it with -race.
func TestStress(t *testing.T) {
	const workers = 8
	rounds := scale(800)
	tr := mailbox.New()
	sent := make([]int, workers*rounds)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			buf := make([]pool.Handle, 0, 100)
			for i := range rounds {
				id := w*rounds + i
				prod, err := tr.NewProducer()
				if err != nil {
					errc <- err
					return
				}
				for k := range 1 + id%4 {
					buf = buf[:0]
					for range 1 + (id*7+k*31)%100 {
						buf = append(buf, transporttest.Handle(id, sent[id]))
						sent[id]++
					}
					if err := prod.Send(buf); err != nil {
						errc <- err
						return
					}
					clear(buf) // Send copied it
				}
				if id%5 != 4 {
					if err := prod.Close(); err != nil {
						errc <- err
						return
					}
				}
				if i%16 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	must(t, transporttest.Collect(tr, &wg, errc, sent))
	if n, want := mailbox.Boxes(tr), workers*rounds/5; n != want {
		t.Fatalf("%d mailboxes kept, want the %d of the producers left open", n, want)
	}
}
