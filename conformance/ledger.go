package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/locus-go/locus/pool"
)

// ledger accounts for every handle of a transport case. Producers send
// chunks planned before they start, from a handleSource, so every delivered
// handle is attributed to the one producer that may send it; a producer
// may send a handle several times.
//
// sent[p] is written by producer p only and read by the owner after the
// producer's Send returned (a channel or the crew orders the two); got,
// strays and the counts are written by the owner's sink only.
type ledger struct {
	ownedSink
	src    *handleSource
	sent   [][]pool.Handle // per producer: the handles of its accepted sends, in order
	got    [][]pool.Handle // per producer: the handles delivered, in order
	strays []pool.Handle   // delivered, planned by no producer
	poison map[pool.Handle]bool
}

// ownedSink is a sink that is the owner's, to be called during Drain only:
// handles passed to it at any other time, or by overlapping Puts (see
// putGuard), are counted, not passed on. n counts the others.
type ownedSink struct {
	sink     *pool.Sink
	n        int
	draining atomic.Bool
	outside  atomic.Int64
	guard    putGuard
}

// init makes the sink, which passes each chunk of the owner's to put.
func (o *ownedSink) init(put func(chunk []pool.Handle)) {
	o.sink = pool.NewSink(func(chunk []pool.Handle) {
		if !o.draining.Load() {
			o.outside.Add(int64(len(chunk)))
			return
		}
		defer o.guard.exit()
		if !o.guard.enter(len(chunk)) {
			return
		}
		o.n += len(chunk)
		put(chunk)
	})
}

// drain drains tr once and returns how many handles came.
func (o *ownedSink) drain(tr pool.Transport) int {
	before := o.n
	o.draining.Store(true)
	tr.Drain(o.sink)
	o.draining.Store(false)
	return o.n - before
}

// check reports handles passed to the sink outside Drain, and overlapping
// Puts.
func (o *ownedSink) check() error {
	if n := o.outside.Load(); n > 0 {
		return violationf(ErrContract, "the transport passed %d handles to the sink outside Drain: a sink is the owner's, during Drain only", n)
	}
	return o.guard.check()
}

// putGuard catches a transport that calls one sink from several goroutines
// at once: a sink is the owner's, and Drain passes it handles from one
// goroutine at a time. Handles of an overlapping Put are counted, not
// recorded.
type putGuard struct {
	in      atomic.Int32
	overlap atomic.Int64
}

// enter reports whether the caller is alone in the sink; exit must follow.
func (g *putGuard) enter(n int) bool {
	if g.in.Add(1) != 1 {
		g.overlap.Add(int64(n))
		return false
	}
	return true
}

func (g *putGuard) exit() { g.in.Add(-1) }

// check reports overlapping Puts.
func (g *putGuard) check() error {
	if n := g.overlap.Load(); n > 0 {
		return violationf(ErrContract, "the transport called the sink from several goroutines at once (%d handles passed by overlapping calls): a sink is the owner's, called by one goroutine at a time", n)
	}
	return nil
}

func newLedger(src *handleSource, producers int) *ledger {
	l := &ledger{
		src:    src,
		sent:   make([][]pool.Handle, producers),
		got:    make([][]pool.Handle, producers),
		poison: map[pool.Handle]bool{},
	}
	l.init(func(chunk []pool.Handle) {
		for _, h := range chunk {
			if p, ok := l.src.owner[h]; ok && p < len(l.got) {
				l.got[p] = append(l.got[p], h)
			} else {
				l.strays = append(l.strays, h)
			}
		}
	})
	return l
}

// tally is a sink for cases that only count what comes (and may look at
// each handle). Like the ledger it belongs to the owner during Drain.
type tally struct{ ownedSink }

// newTally returns a tally that also passes every handle to each, if set.
func newTally(each func(pool.Handle)) *tally {
	t := &tally{}
	t.init(func(chunk []pool.Handle) {
		if each != nil {
			for _, h := range chunk {
				each(h)
			}
		}
	})
	return t
}

// sentTotal returns how many handles producers have sent so far.
func (l *ledger) sentTotal() int {
	n := 0
	for _, s := range l.sent {
		n += len(s)
	}
	return n
}

// drainDry drains until two drains in a row deliver nothing. By the
// contract one is enough (a drain that starts after every Send returned and
// finds nothing means nothing is pending); the second keeps a transport that
// is one drain late from failing every case at random, leaving that to
// DrainAfterSend. It stops early when far more was delivered than sent (a
// transport that keeps delivering) or when ctx ends.
func (l *ledger) drainDry(ctx context.Context, tr pool.Transport) error {
	limit := 2*l.sentTotal() + 1024
	for empty := 0; empty < 2; {
		if l.drain(tr) > 0 {
			empty = 0
		} else {
			empty++
		}
		if l.n > limit {
			return violationf(ErrDuplicated, "drains keep delivering: %d handles delivered, %d sent", l.n, l.sentTotal())
		}
		if ctx.Err() != nil {
			return violationf(ErrDeadlock, "drains kept delivering until the watchdog fired")
		}
	}
	return nil
}

// settle drains until nothing more comes (see drainDry) and checks the
// delivery (see verdict).
func (l *ledger) settle(ctx context.Context, tr pool.Transport) error {
	if err := l.drainDry(ctx, tr); err != nil {
		return err
	}
	return l.verdict()
}

// verdict compares what was delivered with what was sent: every handle
// exactly once per send, in each producer's order, with every field intact.
func (l *ledger) verdict() error {
	if err := l.check(); err != nil {
		return err
	}
	if len(l.strays) > 0 {
		h := l.strays[0]
		if l.poison[h] {
			return violationf(ErrAliased, "delivered %v, which the producer wrote into its chunk after Send returned: the transport kept the caller's slice instead of copying it (%d such handles)",
				h, len(l.strays))
		}
		return violationf(ErrCorrupted, "delivered %v, which no producer sent: a field of a handle was changed or lost on the way (%d such handles of %d delivered)",
			h, len(l.strays), l.n)
	}
	for p := range l.sent {
		if err := compareDelivery(fmt.Sprintf("producer %d", p), l.sent[p], l.got[p]); err != nil {
			return err
		}
	}
	return nil
}

// compareDelivery checks that got is exactly sent.
func compareDelivery(who string, sent, got []pool.Handle) error {
	if slices.Equal(sent, got) {
		return nil
	}
	want := make(map[pool.Handle]int, len(sent))
	for _, h := range sent {
		want[h]++
	}
	have := make(map[pool.Handle]int, len(got))
	for _, h := range got {
		have[h]++
		if have[h] > want[h] {
			return violationf(ErrDuplicated, "%s: %v delivered %d times, sent %d times (%d handles sent, %d delivered)",
				who, h, have[h], want[h], len(sent), len(got))
		}
	}
	missing, suppressed := 0, 0
	var first pool.Handle
	firstAt := -1
	for i, h := range sent {
		if have[h] < want[h] {
			if firstAt < 0 {
				first, firstAt = h, i
			}
			if have[h] > 0 {
				suppressed++
			}
			missing++
			have[h]++ // count each missing send once
		}
	}
	if missing > 0 {
		msg := ""
		if suppressed > 0 {
			msg = fmt.Sprintf("; %d of them repeat a handle that was delivered fewer times than sent (repeats merged?)", suppressed)
		}
		return violationf(ErrLost, "%s: %d of %d handles sent never delivered, the first %v (#%d sent)%s",
			who, missing, len(sent), first, firstAt, msg)
	}
	for i := range sent {
		if sent[i] != got[i] {
			return violationf(ErrOrder, "%s: delivery #%d is %v, but #%d sent was %v: the producer's order was not kept",
				who, i, got[i], i, sent[i])
		}
	}
	return nil
}

// send publishes chunk through prod: with TrySend first when try is set and
// prod is a TryProducer (the rest with Send), else with Send. It checks
// TrySend's count against its error.
func send(prod pool.Producer, chunk []pool.Handle, try bool) error {
	if tp, ok := prod.(pool.TryProducer); ok && try {
		n, err := tp.TrySend(chunk)
		switch {
		case n < 0 || n > len(chunk):
			return violationf(ErrContract, "TrySend of %d handles returned %d", len(chunk), n)
		case err == nil && n != len(chunk):
			return violationf(ErrContract, "TrySend of %d handles = (%d, nil): a partial send must report pool.ErrFull", len(chunk), n)
		case err == nil:
			return nil
		case !errors.Is(err, pool.ErrFull):
			return fmt.Errorf("TrySend: %w", err)
		case n == len(chunk):
			return violationf(ErrContract, "TrySend of %d handles = (%d, %v): it sent them all", len(chunk), n, err)
		}
		chunk = chunk[n:]
	}
	return prod.Send(chunk)
}

// exchange runs producers that send planned chunks while the owner drains,
// then checks the delivery. Producer p sends plans[p]; producers from
// staggered on are started only once the owner is draining, so that
// NewProducer races Drain. With try, producers of a bounded transport send
// with TrySend and Send by turns; with retire, each Closes its producer
// after its last Send.
type exchange struct {
	tr        pool.Transport
	l         *ledger
	plans     [][][]pool.Handle
	staggered int
	try       bool
	retire    bool
}

func (e *exchange) run(ctx context.Context) error {
	var c crew
	var sent atomic.Int64 // handles sent, for reports while producers run
	// start runs producer p, with prod if the owner made it already, from
	// chunk skip of its plan on.
	start := func(p int, prod pool.Producer, skip int) {
		c.Go(func() error {
			if prod == nil {
				var err error
				prod, err = e.tr.NewProducer()
				mustOK(fmt.Sprintf("producer %d: NewProducer", p), err)
			}
			var buf []pool.Handle
			for i, chunk := range e.plans[p][skip:] {
				if ctx.Err() != nil {
					return nil // stopped: the owner reports
				}
				// Send from a reused buffer, as a worker would.
				buf = append(buf[:0], chunk...)
				if err := send(prod, buf, e.try && i%2 == 0); err != nil { // not require: no garbage per send
					must(violationf(ErrContract, "producer %d: send of chunk %d (%d handles): %v", p, i, len(chunk), err))
				}
				e.l.sent[p] = append(e.l.sent[p], chunk...)
				sent.Add(int64(len(chunk)))
			}
			if e.retire {
				mustOK(fmt.Sprintf("producer %d: Close", p), prod.Close())
			}
			return nil
		})
	}
	first := min(e.staggered, len(e.plans))
	if first == 0 {
		first = len(e.plans)
	}
	// The first producers are made before the first Drain, the others on
	// their own goroutines while the owner drains.
	prods := make([]pool.Producer, first)
	for p := range prods {
		prod, err := e.tr.NewProducer()
		if err != nil {
			return violationf(ErrContract, "producer %d: NewProducer: %v", p, err)
		}
		prods[p] = prod
	}
	// On an unbounded transport the first producers send their first two
	// chunks before the owner drains at all, so that the first drain finds
	// several chunks of several producers waiting.
	skip := make([]int, len(e.plans))
	if _, bounded := boundsOf(e.tr); !bounded {
		for p, prod := range prods {
			for _, chunk := range e.plans[p][:min(2, len(e.plans[p]))] {
				if err := prod.Send(chunk); err != nil {
					return violationf(ErrContract, "producer %d: Send of %d handles: %v", p, len(chunk), err)
				}
				e.l.sent[p] = append(e.l.sent[p], chunk...)
				skip[p]++
			}
		}
	}
	for p, prod := range prods {
		start(p, prod, skip[p])
	}
	next := first
	var b backoff
	for drains, empty := 0, 0; ; drains++ {
		if next < len(e.plans) && drains%4 == 3 {
			start(next, nil, 0)
			next++
		}
		done := next == len(e.plans) && c.finished() // before the drain
		got := e.l.drain(e.tr)
		if got > 0 {
			empty = 0
		} else if done {
			// Drains that started after every Send returned found
			// nothing (two in a row: see drainDry).
			if empty++; empty == 2 {
				break
			}
			continue
		}
		if got > 0 {
			b.reset()
		} else if !b.wait(ctx) {
			return c.stopped(fmt.Sprintf("of %d producers (%d of %d handles delivered so far) were", len(e.plans), e.l.n, sent.Load()))
		}
	}
	if err := c.wait(ctx, "producers"); err != nil {
		return err
	}
	return e.l.verdict()
}
