package adapters

import (
	"math"
	"time"

	"github.com/locus-go/locus/internal/relay"
	"github.com/locus-go/locus/pool"
)

// task is one Prefetch handed to a copy worker. The owner fills it before
// the channel send and does not touch it again until the Drain that takes
// its completion; the worker writes dst and err before the mailbox Send.
// So the channel orders the owner's writes before the worker's reads, and
// the mailbox (Send's CAS, Drain's Swap) the worker's writes before the
// owner's reads.
//
// A load from the cold tier first runs as tier jobs, applied by the
// owner's drainCold, which then sends the task on: the tier's Drain orders
// the tier workers' writes before it, the channel before this worker.
type task struct {
	seq    uint64
	idx    uint32
	from   uint8  // fromWarm, fromCold or fromLoader
	dst    []byte // the adapter's hot run (or its tail): pinned, and no handle exists while it loads
	src    []byte // what to copy or decode into dst: the warm copy (warmBusy keeps it) or the cold tier's staged bytes
	quant  bool
	q      Quant
	loader Loader
	stage  []byte // the cold tier's staging buffer, given back at completion
	moved  int    // bytes read from the cold tier
	err    error
}

// Where a task loads from.
const (
	fromLoader uint8 = iota
	fromWarm
	fromCold
)

// Done reports one finished Prefetch, returned by Drain.
type Done struct {
	ID  string
	Err error // nil: the adapter is hot
}

// Prefetch starts loading adapter id into the hot tier on a copy worker,
// demoting as Acquire does to make room, and returns at once; the
// completion comes back through a chunk mailbox (transport/mailbox, the
// pool's remote-free path) and is applied by the owner's next Drain after
// it, which reports it in a Done. Meanwhile the adapter is Loading:
// Acquire returns ErrLoading, and the run cannot be evicted. A Prefetch of
// an adapter that is hot or loading does nothing.
//
// It fails as Acquire does, and with ErrBusy when the prefetches in flight
// reached the limit (WithWorkers).
func (m *Manager) Prefetch(id string) error {
	idx, err := m.lookup(id)
	if err != nil {
		return err
	}
	now := m.now()
	m.expirePins(now)
	err = m.prefetch(idx, now, noLimit)
	m.debugCheck()
	return err
}

func (m *Manager) prefetch(idx uint32, now int64, limit float64) error {
	a := &m.ads[idx]
	if !a.run.IsZero() {
		return nil
	}
	if m.inflight >= m.cfg.inflight {
		return ErrBusy
	}
	r, err := m.allocHot(idx, now, limit)
	if err != nil {
		return err
	}
	a = &m.ads[idx]
	buf, err := m.hot.Bytes(r)
	if err != nil {
		_ = m.hot.Free(r)
		return err
	}
	m.seq++
	t := &task{seq: m.seq, idx: idx, dst: buf[:a.size], loader: a.loader}
	queued := false
	switch {
	case !a.warm.IsZero():
		wb, _ := m.warm.Bytes(a.warm)
		t.from, t.src, t.quant, t.q = fromWarm, wb[:a.warmLen], a.warmQ, m.cfg.quant
		a.warmBusy++
	case m.coldLoadable(idx):
		// The tier's jobs run first; drainCold sends the task on.
		if _, err := m.startColdLoad(idx, buf, t); err == nil {
			t.from, queued = fromCold, true
		}
	}
	a = &m.ads[idx]
	m.setHot(idx, r, now)
	m.c.promotions-- // counted when the load completes
	a.task = t
	m.inflight++
	m.c.prefetches++
	m.reindex(idx, now)
	if !queued {
		m.tasks <- t // never blocks: at most inflight tasks, the channel's capacity
	}
	return nil
}

// worker runs prefetch copies until the task channel closes, reporting
// each on its own mailbox producer (used by this goroutine only), and
// takes shares of the owner's int8 decodes (decodeJob) when idle.
func (m *Manager) worker(p pool.Producer) {
	defer m.wg.Done()
	defer func() { _ = p.Close() }()
	var out [1]pool.Handle
	for {
		var t *task
		select {
		case j := <-m.parts: // a share of the owner's decode
			j.run()
			j.wg.Done()
			continue
		case next, ok := <-m.tasks:
			if !ok {
				return
			}
			t = next
		}
		switch {
		case t.from == fromLoader:
			t.err = load(t.loader, t.dst)
		case t.quant:
			t.err = t.q.Decode(t.dst, t.src)
		default:
			copy(t.dst, t.src)
		}
		out[0] = relayHandle(relay.ID{Gen: t.seq, Slot: t.idx})
		_ = p.Send(out[:]) // fails only once Close has stopped the workers
	}
}

// Drain applies what other goroutines sent since the last Drain: the
// releases of every Releaser, the cold tier's finished copies (WithCold:
// it runs the tier's Drain; stores become loadable copies, a load from the
// tier hands its Prefetch on), and the completions of Prefetch copies, one
// Done per finished prefetch appended to dst; and it publishes Stats when
// a Snapshot asked since the last publication (one atomic load if not).
// It never waits. Call it once per scheduling step. Its error is the first rejected release, if any
// (each is counted in Stats.RejectedReleases and changed nothing).
func (m *Manager) Drain(dst []Done) ([]Done, error) {
	if !m.ok() {
		return dst, errClosed
	}
	m.out, m.drainE = dst, nil
	m.rel.Drain(m.relSink)
	m.drainCold()
	m.done.Drain(m.doneSink)
	dst, m.out = m.out, nil
	err := m.drainE
	m.drainE = nil
	if m.pub.Wanted() {
		m.Stats() // publishes for the Snapshot that asked
	}
	m.debugCheck()
	return dst, err
}

// applyReleases is the release mailbox's sink.
func (m *Manager) applyReleases(chunk []pool.Handle) {
	for _, ph := range chunk {
		id := relayID(ph)
		m.c.remoteReleases++
		if err := m.release(Handle{gen: id.Gen, idx: id.Slot, mgr: id.Owner}); err != nil && m.drainE == nil {
			m.drainE = err
		}
	}
}

// complete is the completion mailbox's sink.
func (m *Manager) complete(chunk []pool.Handle) {
	now := m.now()
	for _, ph := range chunk {
		id := relayID(ph)
		seq, idx := id.Gen, id.Slot
		if int(idx) >= len(m.ads) || m.ads[idx].task == nil || m.ads[idx].task.seq != seq {
			m.c.invalid++ // cannot happen: workers report only tasks they were given
			continue
		}
		a := &m.ads[idx]
		t := a.task
		a.task = nil
		m.inflight--
		if t.from == fromWarm {
			a.warmBusy--
		}
		if t.stage != nil {
			m.cold.putStage(t.stage)
			t.stage = nil
		}
		if t.err != nil {
			m.dropHot(idx, true)
			m.c.loadErrors++
			m.out = append(m.out, Done{ID: a.id, Err: t.err})
			continue
		}
		switch t.from {
		case fromWarm:
			m.c.warmLoads++
			m.c.bytesMoved += uint64(len(t.src))
		case fromCold:
			m.c.coldTierLoads++
			m.c.bytesMoved += uint64(t.moved)
		default:
			m.c.coldLoads++
			m.c.bytesMoved += uint64(a.size)
			a.loads = addLoad(a.loads)
		}
		a.loaded = now
		m.c.promotions++
		m.syncPin(a)
		m.reindex(idx, now)
		m.out = append(m.out, Done{ID: a.id})
	}
}

// durOf converts nanoseconds since the epoch to a Duration.
func durOf(ns int64) time.Duration { return time.Duration(min(ns, math.MaxInt64)) }
