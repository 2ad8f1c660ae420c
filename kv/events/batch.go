package events

import (
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/kv"
)

// A batch is one message in the making: the events the owner copied into it
// and, once sealed, its sequence number and timestamp.
//
// # Ownership
//
// A batch is on the free list or held by exactly one side. The owner holds
// the batch it is filling (Publisher.cur); the publisher's goroutine holds
// the batches in the queue and the ones it is publishing. Batches change
// hands only through the two channels (queue: owner to publisher; free:
// back to the owner, from the publisher or from the owner's own drops,
// each channel send a happens-before edge to the receiver) and through the
// seal of the owner's current batch by the publisher's flush timer, the one
// place the two sides race for a batch. They settle it with state, a word
// of (generation << 2 | status):
//
//   - writing: the owner is copying an event into the batch. Only the owner
//     sets it, with a CAS from open, or with a Store on a batch fresh from
//     the free list, which is sealed, so the flush timer cannot take it.
//   - open: the owner is between events; the batch holds at least one. The
//     owner's Store of open after writing is a release: the flush timer's
//     CAS from open to sealed (an acquire) sees every event copied before
//     it.
//   - sealed: the batch has left the owner. Whoever's CAS from open to
//     sealed succeeded (the owner, handing a full batch to the queue, or
//     the flush timer, publishing it) holds it; the other side's CAS fails.
//
// A batch goes back to the free list sealed, with its generation bumped, so
// that neither the owner's stale Publisher.cur (whose expected state carries
// the old generation) nor the flush timer's stale Publisher.shared (which
// only seals an open batch) can take it while it is free.
type batch struct {
	state atomic.Uint64

	seq  uint64
	ts   time.Time
	recs []record
	hash []kv.Hash
	toks []uint32
}

// The status bits of batch.state.
const (
	writing = 1
	open    = 2
	sealed  = 3
)

func state(gen uint64, status uint64) uint64 { return gen<<2 | status }

// A record is one copied event; its hashes and tokens follow those of the
// records before it in batch.hash and batch.toks.
type record struct {
	kind      kv.EventKind
	hashes    int
	tokens    int
	blockSize int
	parent    kv.Hash
	key       kv.Key
	medium    string // the event's own medium; empty: the publisher's
}

// add copies ev into b. Only the holder of b calls it.
func (b *batch) add(ev *kv.Event) {
	r := record{kind: ev.Kind, hashes: len(ev.Hashes), blockSize: ev.BlockSize, key: ev.Key, medium: ev.Medium}
	b.hash = append(b.hash, ev.Hashes...)
	if ev.Kind == kv.BlockStored {
		r.parent = ev.Parent
		r.tokens = len(ev.Tokens)
		b.toks = append(b.toks, ev.Tokens...)
	}
	b.recs = append(b.recs, r)
}

// reset empties b for reuse, keeping its buffers, and returns it to the
// sealed status of a free batch with the next generation.
func (b *batch) reset() {
	clear(b.recs) // drop the adapter, salt and medium strings
	b.recs, b.hash, b.toks = b.recs[:0], b.hash[:0], b.toks[:0]
	b.ts = time.Time{}
	b.state.Store(state(b.state.Load()>>2+1, sealed))
}
