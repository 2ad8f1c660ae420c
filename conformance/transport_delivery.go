package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/locus-go/locus/pool"
)

// worker is a producer on a goroutine of its own that sends the chunks it is
// given, one at a time, and reports each Send's result.
type worker struct {
	prod pool.Producer
	jobs chan job
	done chan error
	gid  atomic.Int64 // the worker goroutine's id, for spinning
}

// job is one Send; after runs on the worker right after a Send that
// returned nil, before the worker reports.
type job struct {
	chunk []pool.Handle
	after func()
}

func startWorker(c *crew, prod pool.Producer) *worker {
	w := &worker{prod: prod, jobs: make(chan job), done: make(chan error, 1)}
	c.Go(func() error {
		w.gid.Store(goid())
		for j := range w.jobs {
			err := w.prod.Send(j.chunk)
			if err == nil && j.after != nil {
				j.after()
			}
			w.done <- err
		}
		return nil
	})
	return w
}

// stopWorkers ends the workers and waits for them.
func stopWorkers(ctx context.Context, c *crew, ws ...*worker) error {
	for _, w := range ws {
		if w != nil {
			close(w.jobs)
		}
	}
	return c.wait(ctx, "workers")
}

// mustStopping ends the case, unless err is nil, with err joined with what
// stopping the workers ws reports.
func mustStopping(ctx context.Context, c *crew, err error, ws ...*worker) {
	if err != nil {
		must(errors.Join(err, stopWorkers(ctx, c, ws...)))
	}
}

// give hands w a job and waits for its Send to return (see awaitSend).
func give(ctx context.Context, tr pool.Transport, l *ledger, w *worker, j job, drain bool) error {
	if err := handOut(ctx, w, j); err != nil {
		return err
	}
	return awaitSend(ctx, tr, l, w, len(j.chunk), drain)
}

// handOut hands w a job.
func handOut(ctx context.Context, w *worker, j job) error {
	select {
	case w.jobs <- j:
		return nil
	case <-ctx.Done():
		return violationf(ErrDeadlock, "a worker did not take its next chunk: its previous Send never returned")
	}
}

// awaitSend waits for w's Send of n handles to return. With drain set the
// owner drains into l meanwhile (a bounded queue may need the room);
// without, it only waits. It fails with a deadlock violation if the
// watchdog fires first.
func awaitSend(ctx context.Context, tr pool.Transport, l *ledger, w *worker, n int, drain bool) error {
	var b backoff
	for {
		select {
		case err := <-w.done:
			if err != nil {
				return violationf(ErrContract, "Send of %d handles: %v", n, err)
			}
			return nil
		default:
		}
		if drain && l.drain(tr) > 0 {
			b.reset()
		} else if !b.wait(ctx) {
			if drain {
				return violationf(ErrDeadlock, "Send of %d handles did not return while the owner drained (%d delivered so far)", n, l.n)
			}
			return violationf(ErrDeadlock, "Send of %d handles into a queue with room for it did not return", n)
		}
	}
}

// freshChunk returns n handles no producer has, now p's.
func freshChunk(src *handleSource, p, n int) []pool.Handle {
	hs := make([]pool.Handle, n)
	for i := range hs {
		hs[i] = src.fresh(p)
	}
	return hs
}

// sendFresh has prod, producer p of l, Send n fresh handles and records
// them as sent.
func sendFresh(l *ledger, prod pool.Producer, p, n int) error {
	chunk := freshChunk(l.src, p, n)
	if err := prod.Send(chunk); err != nil {
		return violationf(ErrContract, "Send of %d handles: %v", n, err)
	}
	l.sent[p] = append(l.sent[p], chunk...)
	return nil
}

func checkDrainEmpty(r *trRun) error {
	tr := r.x
	l := newLedger(newHandleSource(1), 1)
	for i := range 200 {
		n := l.drain(tr)
		require(n == 0, ErrCorrupted, "drain %d of a transport with no producer delivered %d handles", i, n)
	}
	prods, err := several(3, "NewProducer", tr.NewProducer)
	must(err)
	for i := range 200 {
		n := l.drain(tr)
		require(n == 0, ErrCorrupted, "drain %d with three idle producers delivered %d handles", i, n)
	}
	// Once what was sent is delivered, later drains deliver nothing again.
	must(sendFresh(l, prods[0], 0, 1))
	must(l.settle(r.ctx, tr))
	for i := range 200 {
		n := l.drain(tr)
		require(n == 0, ErrDuplicated, "drain %d after everything sent was delivered delivered %d more handles", i, n)
	}
	return nil
}

func checkDrainAfterSend(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	const producers = 12
	src := newHandleSource(2)
	l := newLedger(src, producers)
	prods, err := several(producers, "NewProducer", tr.NewProducer)
	must(err)
	// The owner's own Send of one handle, then one Drain, many times.
	for i := range 100 {
		must(sendFresh(l, prods[0], 0, 1))
		if n := l.drain(tr); n != 1 {
			return lateOrLost(ctx, tr, l, violationf(ErrLost, "Drain %d right after a Send of one handle delivered %d handles", i, n))
		}
	}
	must(l.verdict())
	// Workers send, the owner waits for their Sends to return, then
	// drains once: everything they sent must come.
	var c crew
	ws := make([]*worker, producers)
	for p := 1; p < producers; p++ {
		ws[p] = startWorker(&c, prods[p])
	}
	// fail stops the workers and ends the case with err, unless err is nil.
	fail := func(err error) {
		if err != nil {
			_ = stopWorkers(ctx, &c, ws...)
			must(err)
		}
	}
	// What one queue takes per Drain; a shared queue splits it among the
	// producers.
	perQueue := 64
	if bounded {
		perQueue = min(bd.Capacity, bd.Batch)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range r.scaled(300) {
		budget := perQueue
		chunks, senders := make([][]pool.Handle, producers), 0
		for p := range producers {
			if rng.IntN(2) == 0 && !(p == producers-1 && iter%2 == 0) {
				continue
			}
			if bounded && !bd.PerProducer && budget == 0 {
				break
			}
			n := 1 + rng.IntN(8)
			switch {
			case !bounded:
				switch rng.IntN(64) {
				case 0, 1, 2, 3, 4, 5, 6, 7:
					n = 1 + rng.IntN(64)
				case 8:
					n = 1 + rng.IntN(min(5000, r.longest()))
				}
			case bd.Chunked:
				n = 1 + rng.IntN(40)
				if rng.IntN(64) == 0 {
					n = 1 + rng.IntN(min(5000, r.longest()))
				}
				budget-- // one item
			case bd.PerProducer:
				n = min(n, perQueue)
			default:
				n = min(n, budget)
				budget -= n
			}
			var prev pool.Handle
			if s := l.sent[p]; len(s) > 0 {
				prev = s[len(s)-1]
			}
			chunks[p] = src.chunk(p, n, prev)
			senders++
		}
		// Hand the chunks out, then wait for every Send to return.
		for p, chunk := range chunks {
			if chunk == nil || p == 0 {
				continue
			}
			fail(handOut(ctx, ws[p], job{chunk: chunk}))
		}
		if chunks[0] != nil {
			fail(contractErr("Send", prods[0].Send(chunks[0])))
		}
		for p, chunk := range chunks {
			if chunk == nil || p == 0 {
				continue
			}
			select { // a queue with room: the Send returns without a Drain
			case err := <-ws[p].done:
				fail(contractErr(fmt.Sprintf("Send of %d handles", len(chunk)), err))
			case <-ctx.Done():
				fail(violationf(ErrDeadlock, "a Send of %d handles into a queue with room for it did not return", len(chunk)))
			}
		}
		mark := make([]int, producers)
		for p, chunk := range chunks {
			mark[p] = len(l.got[p])
			l.sent[p] = append(l.sent[p], chunk...)
		}
		l.drain(tr)
		for p, chunk := range chunks {
			err := compareDelivery(fmt.Sprintf("producer %d", p), chunk, l.got[p][mark[p]:])
			if err == nil && len(l.strays) > 0 {
				err = l.verdict()
			}
			if err != nil {
				fail(lateOrLost(ctx, tr, l, fmt.Errorf("round %d, one Drain after Sends of %d producers returned: %w", iter, senders, err)))
			}
		}
	}
	fail(l.verdict())
	return stopWorkers(ctx, &c, ws...)
}

// lateOrLost adds to a delivery violation whether the missing handles come
// with later drains.
func lateOrLost(ctx context.Context, tr pool.Transport, l *ledger, err error) error {
	if !errors.Is(err, ErrLost) {
		return err
	}
	if l.outside.Load() > 0 || l.guard.overlap.Load() > 0 {
		return l.verdict() // they went to the sink outside Drain, or overlapping
	}
	before := l.n
	if derr := l.drainDry(ctx, tr); derr != nil {
		return err
	}
	if l.n > before {
		return fmt.Errorf("%w (later drains delivered %d more handles: the Drain did not take everything published before it started)", err, l.n-before)
	}
	return fmt.Errorf("%w (no later drain delivered them either)", err)
}

func checkChunkLengths(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	src := newHandleSource(5)
	l := newLedger(src, 1)
	prod, err := tr.NewProducer()
	mustOK("NewProducer", err)
	var c crew
	w := startWorker(&c, prod)
	// A chunk of one handle goes ahead of each chunk where both fit
	// without a drain, so that a long chunk must queue behind a short one.
	twoFit := func(n int) bool {
		return !bounded || (bd.Chunked && bd.Capacity >= 2) || (!bd.Chunked && n+1 <= bd.Capacity)
	}
	for _, n := range chunkLengths(bd, bounded, r.longest()) {
		if twoFit(n) {
			lead := freshChunk(src, 0, 1)
			err := give(ctx, tr, l, w, job{chunk: lead}, false)
			mustStopping(ctx, &c, within(err, "a chunk of one handle ahead of one of %d", n), w)
			l.sent[0] = append(l.sent[0], lead...)
		}
		chunk := freshChunk(src, 0, n)
		// The owner drains during the Send only if the chunk needs it.
		mustStopping(ctx, &c, sendAlone(ctx, tr, l, w, job{chunk: chunk}, chunk, !fits(bd, bounded, n)), w)
	}
	// Hundreds of chunks pending at once, more than any node holds, then
	// long ones behind them: all come, in order.
	backlog, most := 300, 8
	if bounded {
		backlog = min(backlog, bd.Capacity)
		if !bd.Chunked {
			most = 1
		}
	}
	rng := rand.New(rand.NewPCG(5, uint64(backlog)))
	for i := range backlog + 2 {
		n := 1 + rng.IntN(most)
		if i >= backlog && (!bounded || bd.Chunked) {
			n = min(5000, r.longest()) // queued behind the backlog
		}
		chunk := freshChunk(src, 0, n)
		err := give(ctx, tr, l, w, job{chunk: chunk}, i >= backlog)
		mustStopping(ctx, &c, within(err, "chunk %d of a backlog of %d", i, backlog), w)
		l.sent[0] = append(l.sent[0], chunk...)
	}
	mustStopping(ctx, &c, within(l.settle(ctx, tr), "a backlog of %d chunks", backlog), w)
	return stopWorkers(ctx, &c, w)
}

// sendAlone has w send j's chunk, whose handles are sent (see give), then
// drains until nothing more comes and checks that everything sent so far
// was delivered, exactly.
func sendAlone(ctx context.Context, tr pool.Transport, l *ledger, w *worker, j job, sent []pool.Handle, drain bool) error {
	err := give(ctx, tr, l, w, j, drain)
	if err == nil {
		l.sent[0] = append(l.sent[0], sent...)
		err = l.settle(ctx, tr)
	}
	return within(err, "chunk of %d handles", len(j.chunk))
}

func checkHandleValues(r *trRun) error {
	tr, ctx := r.x, r.ctx
	src := newHandleSource(6)
	for _, h := range specialHandles {
		src.claim(0, h)
	}
	l := newLedger(src, 1)
	a, b := src.fresh(0), src.fresh(0)
	reversed := slices.Clone(specialHandles)
	slices.Reverse(reversed)
	chunks := [][]pool.Handle{
		specialHandles,
		reversed,
		{{}, {}, {}},
		slices.Repeat([]pool.Handle{a}, 100),
		{a, a, b, b, a},
		{b}, {b}, {b},
		{specialHandles[1]}, {specialHandles[1], specialHandles[1]},
	}
	prev := b
	for range 20 {
		ch := src.chunk(0, 50, prev)
		chunks = append(chunks, ch)
		prev = ch[len(ch)-1]
	}
	prod, err := tr.NewProducer()
	mustOK("NewProducer", err)
	var c crew
	w := startWorker(&c, prod)
	_, bounded := boundsOf(tr)
	for i, chunk := range chunks {
		err := give(ctx, tr, l, w, job{chunk: chunk}, bounded)
		mustStopping(ctx, &c, within(err, "chunk %d", i), w)
		l.sent[0] = append(l.sent[0], chunk...)
	}
	must(stopWorkers(ctx, &c, w))
	return l.settle(ctx, tr)
}

func checkCopied(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	src := newHandleSource(7)
	l := newLedger(src, 1)
	prod, err := tr.NewProducer()
	mustOK("NewProducer", err)
	var c crew
	w := startWorker(&c, prod)
	lengths := chunkLengths(bd, bounded, r.longest())
	// One set of poison handles, never sent, overwrites every chunk.
	poisons := newHandleSource(8)
	allPoison := make([]pool.Handle, lengths[len(lengths)-1])
	for i := range allPoison {
		for {
			allPoison[i] = poisons.fresh(0)
			if _, sent := src.owner[allPoison[i]]; !sent {
				break
			}
		}
		l.poison[allPoison[i]] = true
	}
	for _, n := range lengths {
		if !fits(bd, bounded, n) {
			continue
		}
		chunk := freshChunk(src, 0, n)
		buf := slices.Clone(chunk)
		poison := allPoison[:n]
		// The worker overwrites its chunk as soon as Send returns; the
		// owner drains only after that.
		err := sendAlone(ctx, tr, l, w, job{chunk: buf, after: func() { copy(buf, poison) }}, chunk, false)
		mustStopping(ctx, &c, err, w)
	}
	return stopWorkers(ctx, &c, w)
}

func checkEmptyChunk(r *trRun) error {
	tr, ctx := r.x, r.ctx
	_, bounded := boundsOf(tr)
	src := newHandleSource(9)
	l := newLedger(src, 1)
	prod, err := tr.NewProducer()
	mustOK("NewProducer", err)
	tp, _ := prod.(pool.TryProducer)
	empties := [][]pool.Handle{nil, {}, make([]pool.Handle, 0, 8)}
	for i := range 100 {
		for k, chunk := range [][]pool.Handle{empties[i%3], {src.fresh(0)}, empties[(i+1)%3], {src.fresh(0)}, empties[(i+2)%3]} {
			if len(chunk) == 0 {
				err := prod.Send(chunk)
				require(err == nil, ErrContract, "Send of an empty chunk (nil: %t) = %v, want nil", chunk == nil, err)
				if tp != nil {
					n, err := tp.TrySend(chunk)
					require(n == 0 && err == nil, ErrContract, "TrySend of an empty chunk = (%d, %v), want (0, nil)", n, err)
				}
				continue
			}
			mustOK("Send", prod.Send(chunk))
			l.sent[0] = append(l.sent[0], chunk...)
			if bounded && k == 1 {
				l.drain(tr) // room for the next one in the smallest queue
			}
		}
		mustIn(l.settle(ctx, tr), "round %d", i)
	}
	return nil
}

func checkExactlyOnce(r *trRun) error {
	tr := r.x
	bd, bounded := boundsOf(tr)
	producers := 24 // more than any fixed table of producers
	if bounded && !bd.PerProducer {
		producers = min(max(producers, bd.Capacity+3), 32) // more producers than the shared queue holds
	}
	src := newHandleSource(10)
	total := r.scaled(24000)
	if bounded {
		total = r.scaled(16000)
	}
	// The lengths of ChunkLengths (those that fit a bounded queue without
	// waiting, for a per-handle one), then random ones.
	var lengths []int
	for _, n := range chunkLengths(bd, bounded, r.longest()) {
		if n <= 1100 || !bounded || bd.Chunked {
			lengths = append(lengths, n)
		}
	}
	plans := planExchange(src, producers, lengths, total, 11)
	e := exchange{tr: tr, l: newLedger(src, producers), plans: plans, staggered: producers / 2, try: true}
	return e.run(r.ctx)
}

// planExchange plans the chunks of producers: every length of lengths once,
// dealt round-robin, then random lengths (mostly short, some up to a
// thousand) of about total handles more.
func planExchange(src *handleSource, producers int, lengths []int, total int, seed uint64) [][][]pool.Handle {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	plans := make([][][]pool.Handle, producers)
	prev := make([]pool.Handle, producers)
	add := func(p, n int) {
		ch := src.chunk(p, n, prev[p])
		plans[p] = append(plans[p], ch)
		prev[p] = ch[n-1]
		total -= n
	}
	for i, n := range lengths {
		add(i%producers, n)
		total += n // the random lengths come on top
	}
	for total > 0 {
		n := 1 + rng.IntN(16)
		switch rng.IntN(10) {
		case 0:
			n = 1 + rng.IntN(1100)
		case 1, 2:
			n = 17 + rng.IntN(112)
		}
		add(rng.IntN(producers), n)
	}
	return plans
}

func checkInstances(r *trRun) error {
	ctx := r.ctx
	insts, err := instances(r, liveInstances, func(tr pool.Transport) (pool.Transport, error) { return tr, nil })
	must(err)
	const per = 2 // producers per instance
	src := newHandleSource(12)
	ledgers := make([]*ledger, len(insts))
	prods := make([]pool.Producer, per*len(insts))
	for i, tr := range insts {
		ledgers[i] = newLedger(src, len(prods))
		ps, err := several(per, fmt.Sprintf("instance %d: NewProducer", i), tr.NewProducer)
		must(err)
		copy(prods[i*per:], ps)
	}
	for round := range 20 {
		for i, tr := range insts {
			for j := range per {
				p := i*per + j
				chunk := freshChunk(src, p, 1+round%2)
				if _, bounded := boundsOf(tr); bounded {
					chunk = chunk[:1]
				}
				mustOK(fmt.Sprintf("instance %d: Send", i), prods[p].Send(chunk))
				ledgers[i].sent[p] = append(ledgers[i].sent[p], chunk...)
				if _, bounded := boundsOf(tr); bounded {
					ledgers[i].drain(tr) // room for the next send
				}
			}
		}
		for i, tr := range insts {
			must(ledgers[i].drainDry(ctx, tr))
		}
	}
	for i, l := range ledgers {
		for p, got := range l.got {
			require(p/per == i || len(got) == 0, ErrContract, "instance %d delivered %d handles sent through instance %d: instances of one constructor share state", i, len(got), p/per)
		}
		mustIn(l.verdict(), "instance %d", i)
	}
	// A full instance leaves the others their room.
	if bd, bounded := boundsOf(insts[0]); bounded && bd.Capacity <= maxFilled {
		tp0, ok0 := prods[0].(pool.TryProducer)
		tp1, ok1 := prods[per].(pool.TryProducer)
		if ok0 && ok1 {
			_, err := fillItems(ledgers[0], tp0, 0, bd, bd.Capacity+1)
			mustIn(err, "instance 0")
			n, err := trySendFresh(ledgers[1], tp1, per, 1)
			require(n == 1 && err == nil, ErrContract, "instance 1: TrySend of one handle into an empty queue while instance 0 is full = (%d, %v), want (1, nil): instances share a queue", n, err)
		}
	}
	// Closing one instance leaves the others working.
	mustOK("instance 0: Close", insts[0].Close())
	for i := 1; i < len(insts); i++ {
		mustIn(ledgers[i].settle(ctx, insts[i]), "instance %d", i)
		l := newLedger(src, len(prods))
		mustIn(sendFresh(l, prods[i*per], i*per, 1), "instance %d after instance 0 was closed", i)
		mustIn(l.settle(ctx, insts[i]), "instance %d after instance 0 was closed", i)
	}
	return nil
}

func checkTransportAllocs(r *trRun) error {
	tr := r.x
	bd, bounded := boundsOf(tr)
	prod, err := tr.NewProducer()
	mustOK("NewProducer", err)
	tp, _ := prod.(pool.TryProducer)
	t := newTally(nil)
	// roundTrip sends chunk with send and drains until it is delivered.
	roundTrip := func(chunk []pool.Handle, send func([]pool.Handle) error) func() error {
		return func() error {
			if err := send(chunk); err != nil {
				return violationf(ErrContract, "send of %d handles: %v", len(chunk), err)
			}
			want := t.n + len(chunk)
			for i := 0; t.n < want; i++ {
				if i > len(chunk) {
					if err := t.check(); err != nil {
						return err
					}
					return violationf(ErrLost, "%d of %d handles delivered after %d drains", t.n-want+len(chunk), len(chunk), i)
				}
				t.drain(tr)
			}
			if t.n != want {
				return violationf(ErrDuplicated, "%d handles delivered for a chunk of %d", t.n-want+len(chunk), len(chunk))
			}
			return nil
		}
	}
	runs := r.allocRuns()
	for _, n := range []int{1, 16, 32, 33, 100, 300, 1000, 5000} {
		if !fits(bd, bounded, n) || n > r.longest() {
			continue
		}
		// Long chunks are fewer: a burst allocating again every time is
		// caught at once.
		k := runs
		if n > 100 {
			k = 100
		}
		chunk := handles(n)
		must(noAllocs(k, fmt.Sprintf("Send of %d handles and its Drain", n), roundTrip(chunk, prod.Send)))
		if tp != nil {
			trySend := func(c []pool.Handle) error {
				if k, err := tp.TrySend(c); err != nil || k != len(c) {
					return fmt.Errorf("TrySend into an empty queue = (%d, %v)", k, err)
				}
				return nil
			}
			must(noAllocs(k, fmt.Sprintf("TrySend of %d handles and its Drain", n), roundTrip(chunk, trySend)))
		}
	}
	// Several producers' queues hold items at once when the Drain comes.
	senders := 4
	if bounded && !bd.PerProducer {
		senders = min(senders, bd.Capacity)
	}
	if senders >= 2 {
		more, err := several(senders-1, "NewProducer", tr.NewProducer)
		must(err)
		prods := append([]pool.Producer{prod}, more...)
		chunk := handles(1)
		all := func(c []pool.Handle) error {
			for _, p := range prods {
				if err := p.Send(c[:1]); err != nil {
					return err
				}
			}
			return nil
		}
		must(noAllocs(runs, fmt.Sprintf("Sends of one handle by %d producers and the Drains that deliver them", senders),
			roundTrip(slices.Repeat(chunk, senders), all)))
	}
	for range 60 {
		_, err := tr.NewProducer()
		mustOK("NewProducer", err)
	}
	return noAllocs(runs, "an idle Drain with 64 producers", func() error {
		t.drain(tr)
		return nil
	})
}

// handles returns n distinct handles of one made-up pool.
func handles(n int) []pool.Handle {
	hs := make([]pool.Handle, n)
	for i := range hs {
		hs[i] = mkHandle(1, uint32(i), uint64(2*i+1))
	}
	return hs
}
