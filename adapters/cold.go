package adapters

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/tier"
)

// The cold tier (WithCold): copies of adapters in a tier.Manager, typically
// over tier/disk, each ceil(len/BlockSize) blocks under keys that name one
// registration of one adapter in one Manager.

// An adapter's copy in the cold tier.
const (
	coldNone    uint8 = iota // no copy (or one the Manager no longer counts)
	coldStoring              // a Store is in flight: its keys answer HIT_PENDING
	coldStored               // every block stored: loadable while the tier keeps them all
)

const (
	// coldParts bounds the tier jobs one load is split into: the tier's
	// copy workers run them in parallel (tier.WithWorkers).
	coldParts = 4
	// maxColdStores bounds the stores into the cold tier in flight, and so
	// the staging buffers they hold: an adapter admitted while as many are
	// in flight goes cold unstored (Stats.ColdTierSkipped).
	maxColdStores = 8
	// spareStages is how many staging buffers the Manager keeps for reuse.
	spareStages = 2
	// maxAdmitAfter bounds WithCold's admission count.
	maxAdmitAfter = 1 << 20
)

// WithCold puts a cold tier under the warm one: the tier.Manager t
// (typically over tier/disk, a preallocated file of checksummed slots)
// keeps copies of adapters that leave the hot and warm tiers, so that
// their next load reads a local block device instead of the Loader (a
// remote object store, a file that needs decoding). An adapter is
// admitted once it has been loaded from its Loader at least admitAfter
// times (the field's SSD tiers admit at 2); it is stored when it goes cold
// (its last copy, warm or hot, is dropped): its bytes exactly as they
// leave (the exact weights, or the warm tier's int8 encoding, which a
// load from the cold tier then dequantizes), as ceil(len/t.BlockSize())
// blocks. The copy to the tier runs on t's workers: the owner only copies
// the bytes once into a staging buffer (a memmove) and returns. A load of
// an adapter that is neither hot nor warm reads the cold tier when it
// holds every block, else the Loader; a failed or corrupt block falls back
// to the Loader, never serving wrong bytes.
//
// t becomes the Manager's: it is driven on the Manager's owner goroutine
// by Acquire, Pin, Prefetch, Drain, Tick and Unregister, and nothing else
// may store into it, remove from it, Reset it or take its Drain (its
// events are taken and dropped by Drain). Build it without Admission: the
// Manager admits. Close the Manager before t. Keys name a registration in
// this Manager (an id registered again is stored under new keys, so its
// old weights are never served), so blocks a disk tier recovers from an
// earlier run are never served, only evicted.
//
// An adapter of more blocks than t holds is never admitted
// (Stats.ColdTierRejected). Use it when Loader loads are slow or costly
// and a local disk is faster; not when the Loader already reads a local
// file of the raw weights (that file is the cold tier).
//
// WithCold fails with an error wrapping pool.ErrInvalidConfig for a nil,
// zero or closed t, or admitAfter outside [1, 2^20].
func WithCold(t *tier.Manager, admitAfter int) Option {
	return optionFunc(func(c *config) error {
		if typednil.Is(t) || t.BlockSize() <= 0 || t.BlockSize() > maxSize || t.Capacity() <= 0 {
			return fmt.Errorf("%w: adapters: cold tier needs an open tier.Manager", errConfig)
		}
		// Remove of no keys changes nothing and fails only on a closed tier.
		if _, _, err := t.Remove(nil, nil); err != nil {
			return fmt.Errorf("%w: adapters: cold tier: %w", errConfig, err)
		}
		if admitAfter < 1 || admitAfter > maxAdmitAfter {
			return fmt.Errorf("%w: adapters: cold tier admission after %d loads, want 1 to %d", errConfig, admitAfter, maxAdmitAfter)
		}
		c.cold, c.admitAfter = t, admitAfter
		return nil
	})
}

// coldOp is one store into the cold tier, or one load from it (one or more
// tier jobs, every one mapped to the same op).
type coldOp struct {
	store bool
	idx   uint32
	gen   uint64   // the adapter's registration when the op began
	hash  [32]byte // its keys' hash
	n     int      // its blocks
	stage []byte   // the staging buffer: a store's bytes; a load's int8 copy or last block
	// A store the tier admitted only in part (its own Admission): its
	// blocks are removed once written.
	partial bool

	// Loads.
	parts  int      // tier jobs not yet done
	failed bool     // a job failed
	busy   bool     // a job could not start (the tier's job limit): the copy is not at fault
	dsts   [][]byte // the jobs' buffers (the tier keeps the slices until done)
	run    []byte   // the hot run, whole
	t      *task    // a Prefetch's task; nil for a load on the owner
}

// coldState is the Manager's side of the cold tier.
type coldState struct {
	t      *tier.Manager
	bs     int
	nonce  [16]byte
	ops    map[tier.Job]*coldOp
	byHash map[[32]byte]uint32 // stored copies: the adapter

	blocks  int   // the stored copies' blocks (the copies: byHash)
	bytes   int64 // their bytes
	storing int   // stores in flight

	done   []tier.Done
	keys   []tier.Key
	res    []tier.Result
	srcs   [][]byte
	events []tier.Event
	stages [][]byte
}

func newColdState(t *tier.Manager) *coldState {
	c := &coldState{t: t, bs: t.BlockSize(), ops: map[tier.Job]*coldOp{}, byHash: map[[32]byte]uint32{}}
	_, _ = rand.Read(c.nonce[:]) // never fails (crypto/rand)
	return c
}

// blocksOf is the blocks a copy of n bytes takes.
func (c *coldState) blocksOf(n int) int { return (n + c.bs - 1) / c.bs }

// hashOf names adapter a's registration: the Manager's nonce (so that no
// other Manager, nor this process's next run, shares the keys), the
// registration's order (unique in the Manager) and the id.
func (c *coldState) hashOf(a *adapter) [32]byte {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], a.order)
	h.Write(c.nonce[:])
	h.Write(b[:])
	h.Write([]byte(a.id))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// keysOf returns the keys of a copy of n blocks named hash, in the
// Manager's scratch slice: block i is group i.
func (c *coldState) keysOf(hash [32]byte, n int) []tier.Key {
	k := c.keys[:0]
	for i := range n {
		k = append(k, tier.Key{Hash: hash, Group: uint32(i)})
	}
	c.keys = k
	return k
}

func (c *coldState) getStage(n int) []byte {
	for i, b := range c.stages {
		if cap(b) >= n {
			c.stages[i] = c.stages[len(c.stages)-1]
			c.stages[len(c.stages)-1] = nil
			c.stages = c.stages[:len(c.stages)-1]
			return b[:n]
		}
	}
	return make([]byte, n)
}

func (c *coldState) putStage(b []byte) {
	if b != nil && len(c.stages) < spareStages {
		c.stages = append(c.stages, b)
	}
}

// toCold stores src, adapter idx's last copy (exact, or int8 if q), in the
// cold tier as the adapter goes cold, if it is admitted and not stored
// already. The tier copies on its workers; the staging buffer keeps the
// bytes until the Drain that reports the copy.
func (m *Manager) toCold(idx uint32, src []byte, q bool) {
	c := m.cold
	a := &m.ads[idx]
	if c == nil || a.cold != coldNone {
		return
	}
	n := c.blocksOf(len(src))
	if int(a.loads) < m.cfg.admitAfter || n > c.t.Capacity() {
		m.c.coldRejected++
		return
	}
	if c.storing >= maxColdStores {
		m.c.coldSkipped++
		return
	}
	stage := c.getStage(n * c.bs)
	copy(stage, src)
	clear(stage[len(src):])
	srcs := c.srcs[:0]
	for i := range n {
		srcs = append(srcs, stage[i*c.bs:(i+1)*c.bs])
	}
	c.srcs = srcs
	hash := c.hashOf(a)
	plan, err := c.t.Store(c.keysOf(hash, n), srcs)
	clear(srcs)
	m.coldEvicted(plan.Evicted) // a refusal may have evicted too
	if err != nil {
		c.putStage(stage)
		m.c.coldSkipped++
		return
	}
	if plan.Job.IsZero() { // nothing admitted by the tier
		c.putStage(stage)
		m.c.coldRejected++
		return
	}
	c.ops[plan.Job] = &coldOp{store: true, idx: idx, gen: a.gen, hash: hash, n: n, stage: stage, partial: len(plan.Keys) != n}
	c.storing++
	a = &m.ads[idx]
	a.cold, a.coldLen, a.coldQ = coldStoring, len(src), q
}

// coldEvicted forgets the cold copies the tier evicted a block of, and
// removes their other blocks: a copy is loadable only whole.
func (m *Manager) coldEvicted(keys []tier.Key) {
	for _, k := range keys {
		if idx, ok := m.cold.byHash[k.Hash]; ok {
			m.dropCold(idx)
			m.c.coldEvictions++
		}
	}
}

// dropCold removes adapter idx's stored cold copy from the tier and the
// counts. Blocks already gone (evicted, dropped as corrupt) are ignored.
func (m *Manager) dropCold(idx uint32) {
	c := m.cold
	a := &m.ads[idx]
	if a.cold != coldStored {
		return
	}
	hash := c.hashOf(a)
	n := c.blocksOf(a.coldLen)
	_, _, _ = c.t.Remove(c.keysOf(hash, n), nil) // no job holds them: nothing is busy
	delete(c.byHash, hash)
	c.blocks -= n
	c.bytes -= int64(a.coldLen)
	a.cold = coldNone
}

// coldLoadable reports whether adapter idx's cold copy is whole in the
// tier: stored, and every block a HIT. A copy the tier lost is forgotten.
func (m *Manager) coldLoadable(idx uint32) bool {
	c := m.cold
	if c == nil {
		return false
	}
	a := &m.ads[idx]
	if a.cold != coldStored {
		return false
	}
	res := c.t.Lookup(c.keysOf(c.hashOf(a), c.blocksOf(a.coldLen)), c.res[:0])
	c.res = res
	for _, r := range res {
		if r != tier.Hit {
			m.dropCold(idx)
			m.c.coldEvictions++
			return false
		}
	}
	return true
}

// startColdLoad starts loading adapter idx's cold copy into run (its hot
// run, whole) as up to coldParts tier jobs: straight into the run where
// the blocks fit, through a staging buffer for an int8 copy or a last
// block that overhangs the run. t is the Prefetch's task (nil on the
// owner). It fails only if no job could start.
func (m *Manager) startColdLoad(idx uint32, run []byte, t *task) (*coldOp, error) {
	c := m.cold
	a := &m.ads[idx]
	n := c.blocksOf(a.coldLen)
	op := &coldOp{idx: idx, gen: a.gen, hash: c.hashOf(a), n: n, run: run, t: t, dsts: make([][]byte, n)}
	switch {
	case a.coldQ:
		op.stage = c.getStage(n * c.bs)
		for i := range n {
			op.dsts[i] = op.stage[i*c.bs : (i+1)*c.bs]
		}
	default:
		for i := range n {
			if (i+1)*c.bs <= len(run) {
				op.dsts[i] = run[i*c.bs : (i+1)*c.bs]
				continue
			}
			op.stage = c.getStage(c.bs) // only the last block can overhang
			op.dsts[i] = op.stage
		}
	}
	keys := c.keysOf(op.hash, n)
	parts := min(n, coldParts)
	var err error
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		var j tier.Job
		if j, err = c.t.Load(keys[lo:hi], op.dsts[lo:hi]); err != nil {
			op.busy = true
			break
		}
		c.ops[j] = op
		op.parts++
	}
	if op.parts == 0 {
		c.putStage(op.stage)
		m.c.coldSkipped++
		return nil, err
	}
	return op, nil
}

// loadCold loads adapter idx from the cold tier into run (its hot run,
// whole) on the owner, waiting for the tier's workers: the Drains it runs
// meanwhile apply every other completion too. It reports whether the
// weights are in run; if not, the caller reads the Loader.
func (m *Manager) loadCold(idx uint32, run []byte) bool {
	op, err := m.startColdLoad(idx, run, nil)
	if err != nil {
		return false
	}
	start := time.Now()
	for op.parts > 0 {
		m.drainCold()
		if op.parts > 0 {
			if time.Since(start) < 100*time.Microsecond {
				runtime.Gosched()
			} else {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}
	a := &m.ads[idx]
	ok := !op.failed && !op.busy
	if ok {
		switch {
		case a.coldQ:
			ok = m.decode(run[:a.size], op.stage[:a.coldLen]) == nil
			op.failed = !ok
		case op.stage != nil:
			lo := (op.n - 1) * m.cold.bs
			copy(run[lo:a.size], op.stage)
		}
	}
	m.cold.putStage(op.stage)
	if !ok {
		m.coldFailed(idx, op.failed)
		return false
	}
	return true
}

// coldFailed counts a load from the cold tier that did not deliver: if a
// copy failed (a torn or corrupt block, which the tier dropped) the
// Manager forgets the copy and removes its other blocks; if the tier was
// only busy, the copy stays.
func (m *Manager) coldFailed(idx uint32, failed bool) {
	if !failed {
		m.c.coldSkipped++
		return
	}
	m.c.coldErrors++
	m.dropCold(idx)
}

// drainCold applies the cold tier's completions: stores become loadable
// copies, loads finish. Drain, Tick and the owner's loads call it. If the
// tier was closed under the Manager, every op in flight is abandoned (its
// copies stopped with the tier's workers).
func (m *Manager) drainCold() {
	c := m.cold
	if c == nil {
		return
	}
	c.events = c.t.TakeEvents(c.events[:0])
	clear(c.events)
	if len(c.ops) == 0 {
		return
	}
	done, err := c.t.Drain(c.done[:0])
	c.done = done
	for i := range done {
		op, ok := c.ops[done[i].Job]
		if !ok {
			continue
		}
		delete(c.ops, done[i].Job)
		m.coldDone(op, done[i].OK && done[i].Err == nil)
	}
	clear(done)
	if err != nil {
		for j, op := range c.ops {
			delete(c.ops, j)
			m.coldDone(op, false)
		}
	}
}

// coldDone applies one finished tier job of op.
func (m *Manager) coldDone(op *coldOp, ok bool) {
	c := m.cold
	if op.store {
		m.coldStored(op, ok)
		return
	}
	if !ok {
		op.failed = true
	}
	if op.parts--; op.parts > 0 || op.t == nil {
		return // a load on the owner finishes in loadCold
	}
	// A Prefetch: its worker finishes the load (the staged bytes) or, if
	// the tier failed, reads the Loader; the completion comes back through
	// the worker's mailbox like every Prefetch's.
	t := op.t
	a := &m.ads[op.idx]
	switch {
	case op.failed || op.busy:
		c.putStage(op.stage)
		m.coldFailed(op.idx, op.failed)
		t.from, t.dst, t.src = fromLoader, op.run[:a.size], nil
	case a.coldQ:
		t.from, t.dst, t.src, t.quant, t.q, t.stage = fromCold, op.run[:a.size], op.stage[:a.coldLen], true, m.cfg.quant, op.stage
		t.moved = a.coldLen
	case op.stage != nil:
		lo := (op.n - 1) * c.bs
		t.from, t.dst, t.src, t.stage = fromCold, op.run[lo:a.size], op.stage[:a.size-lo], op.stage
		t.moved = a.coldLen
	default:
		t.from, t.dst, t.src = fromCold, nil, nil
		t.moved = a.coldLen
	}
	m.tasks <- t // never blocks: the task is one of the prefetches in flight
}

// coldStored applies a finished store: the copy is loadable now, unless
// the copy failed, the tier admitted only part of it, or the adapter was
// unregistered meanwhile (then its blocks are removed).
func (m *Manager) coldStored(op *coldOp, ok bool) {
	c := m.cold
	c.storing--
	c.putStage(op.stage)
	live := int(op.idx) < len(m.ads) && m.ads[op.idx].gen == op.gen
	if !ok || op.partial || !live {
		if ok {
			_, _, _ = c.t.Remove(c.keysOf(op.hash, op.n), nil)
		}
		if live {
			m.ads[op.idx].cold = coldNone
		}
		switch {
		case !ok:
			m.c.coldErrors++
		case op.partial && live:
			m.c.coldRejected++
		}
		return
	}
	a := &m.ads[op.idx]
	a.cold = coldStored
	c.byHash[op.hash] = op.idx
	c.blocks += op.n
	c.bytes += int64(a.coldLen)
	m.c.coldStores++
	m.c.bytesMoved += uint64(a.coldLen)
}

// waitCold waits for the cold tier's jobs of this Manager: Close calls it,
// so that no copy reads or writes the Manager's buffers after it.
func (m *Manager) waitCold() {
	for m.cold != nil && len(m.cold.ops) > 0 {
		m.drainCold()
		time.Sleep(10 * time.Microsecond)
	}
}

// checkCold verifies the cold tier's counts against a recount and against
// the tier: every stored copy whole (HIT), every store in flight pending.
func (m *Manager) checkCold(bad func(string, ...any)) {
	c := m.cold
	if c == nil {
		return
	}
	var n, blocks, storing, stores int
	var bytes int64
	for i := range m.ads {
		a := &m.ads[i]
		if !a.live() {
			if a.cold != coldNone {
				bad("unregistered slot %d holds a cold copy", i)
			}
			continue
		}
		if a.cold == coldNone {
			continue
		}
		hash := c.hashOf(a)
		want := tier.Hit
		if a.cold == coldStoring {
			storing++
			want = tier.HitPending
		} else {
			n++
			blocks += c.blocksOf(a.coldLen)
			bytes += int64(a.coldLen)
			if idx, ok := c.byHash[hash]; !ok || idx != uint32(i) {
				bad("cold copy of %q not indexed", a.id)
			}
		}
		if a.task != nil && a.task.from == fromCold {
			continue // a load from the tier in flight: a block that failed is gone already
		}
		for b, r := range c.t.Peek(c.keysOf(hash, c.blocksOf(a.coldLen)), nil) {
			if r != want {
				bad("cold copy of %q: block %d is %v in the tier, want %v", a.id, b, r, want)
				break
			}
		}
	}
	for _, op := range c.ops {
		if op.store {
			stores++
		}
	}
	if n != len(c.byHash) || blocks != c.blocks || bytes != c.bytes || stores != c.storing || storing > stores {
		bad("cold tier: %d/%d copies of %d/%d blocks, %d/%d bytes; %d adapters storing, %d/%d stores",
			n, len(c.byHash), blocks, c.blocks, bytes, c.bytes, storing, stores, c.storing)
	}
}

// addLoad counts one more load through the Loader, saturating.
func addLoad(n uint32) uint32 {
	if n == ^uint32(0) {
		return n
	}
	return n + 1
}
