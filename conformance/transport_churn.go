package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/locus-go/locus/pool"
)

// churnLanes is how many goroutines of Churn make, use and retire producers
// at once: more live producers than any small fixed table holds.
const churnLanes = 16

func checkChurn(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	lives := max(r.scaled(2400)/churnLanes, 4) // producers per lane, one after another
	producers := churnLanes * lives
	src := newHandleSource(22)
	rng := rand.New(rand.NewPCG(22, 23))
	plans := make([][][]pool.Handle, producers)
	for p := range plans {
		var prev pool.Handle
		for range rng.IntN(4) { // from none (an idle producer) to three chunks
			n := 1 + rng.IntN(3)
			if rng.IntN(8) == 0 {
				n = 1 + rng.IntN(64)
			}
			if bounded && !bd.Chunked {
				n = min(n, max(bd.Capacity, 1))
			}
			ch := src.chunk(p, n, prev)
			plans[p] = append(plans[p], ch)
			prev = ch[n-1]
		}
	}
	l := newLedger(src, producers)
	var c crew
	for lane := range churnLanes {
		c.Go(func() error {
			var buf []pool.Handle
			for i := range lives {
				p := lane*lives + i
				prod, err := tr.NewProducer()
				mustOK(fmt.Sprintf("producer %d: NewProducer", p), err)
				for k, chunk := range plans[p] {
					if ctx.Err() != nil {
						return nil // stopped: the owner reports
					}
					buf = append(buf[:0], chunk...)
					if err := send(prod, buf, k%2 == 0); err != nil { // not require: no garbage per send
						must(violationf(ErrContract, "producer %d: send of chunk %d (%d handles): %v", p, k, len(chunk), err))
					}
					l.sent[p] = append(l.sent[p], chunk...)
				}
				mustOK(fmt.Sprintf("producer %d: Close", p), prod.Close())
			}
			return nil
		})
	}
	var b backoff
	for empty := 0; empty < 2; {
		done := c.finished() // before the drain
		switch {
		case l.drain(tr) > 0:
			empty = 0
			b.reset()
		case done:
			empty++ // see ledger.drainDry
		case !b.wait(ctx):
			return c.stopped(fmt.Sprintf("of %d lanes of producers (%d handles delivered so far) were", churnLanes, l.n))
		}
	}
	must(c.wait(ctx, "producers"))
	return l.verdict()
}

// volumeTable is how many distinct handles Volume cycles through: a prime,
// so that the sequence never lines up with a power-of-two node or counter.
const volumeTable = 65521

func checkVolume(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	total := scaled(1<<21 + 1<<16 + 12345)
	if r.light {
		total = 1<<16 + 4321
	}
	table := make([]pool.Handle, min(volumeTable, total))
	src := newHandleSource(24)
	for i := range table {
		table[i] = src.fresh(0)
	}
	// The tally checks each handle against the next one due.
	got, wrong, foreign := 0, 0, 0
	firstWrong, firstForeign := -1, -1
	t := newTally(func(h pool.Handle) {
		if h != table[got%len(table)] {
			if wrong++; firstWrong < 0 {
				firstWrong = got
			}
			if _, sent := src.owner[h]; !sent {
				if foreign++; firstForeign < 0 {
					firstForeign = got
				}
			}
		}
		got++
	})
	prod, err := tr.NewProducer()
	mustOK("NewProducer", err)
	tp, _ := prod.(pool.TryProducer)
	if bounded && tp == nil {
		return skip("the producers of %T are not pool.TryProducers (see the Bounds case)", tr)
	}
	longest := min(4096, r.longest())
	if bounded && !bd.Chunked {
		longest = min(longest, max(bd.Capacity, 1))
	}
	rng := rand.New(rand.NewPCG(25, 26))
	buf := make([]pool.Handle, longest)
	for sent := 0; sent < total; {
		n := min(1+rng.IntN(longest), total-sent)
		chunk := buf[:n]
		for i := range chunk {
			chunk[i] = table[(sent+i)%len(table)]
		}
		if tp == nil {
			err = prod.Send(chunk)
			require(err == nil, ErrContract, "Send of %d handles after %d sent: %v", n, sent, err)
		} else {
			// What does not fit waits for the next Drain.
			for len(chunk) > 0 {
				k, err := tp.TrySend(chunk)
				require(err == nil || errors.Is(err, pool.ErrFull), ErrContract, "TrySend of %d handles after %d sent: %v", len(chunk), sent, err)
				chunk = chunk[k:]
				if len(chunk) > 0 {
					t.drain(tr)
				}
				require(ctx.Err() == nil, ErrDeadlock, "TrySend found no room for %d handles while the owner drained", len(chunk))
			}
		}
		sent += n
		if rng.IntN(4) == 0 {
			t.drain(tr)
		}
	}
	for empty := 0; empty < 2; {
		if t.drain(tr) > 0 {
			empty = 0
		} else {
			empty++
		}
		if got > total || ctx.Err() != nil {
			break
		}
	}
	must(t.check())
	require(got <= total, ErrDuplicated, "one producer sent %d handles through one instance, %d delivered", total, got)
	require(got >= total, ErrLost, "one producer sent %d handles through one instance, %d delivered (the first out of place: #%d)", total, got, firstWrong)
	require(wrong == 0 || foreign == 0, ErrCorrupted, "one producer sent %d handles through one instance: %d delivered were never sent (a field changed), the first #%d", total, foreign, firstForeign)
	require(wrong == 0, ErrOrder, "one producer sent %d handles through one instance: %d delivered out of place, the first #%d", total, wrong, firstWrong)
	return nil
}
