package kv

import (
	"fmt"

	"github.com/locus-go/locus/internal/relay"
	"github.com/locus-go/locus/pool"
)

// SeqID names one sequence of one Manager: the manager, the sequence's slot
// and the slot's generation when the sequence was admitted or forked. Like
// a pool.Handle it matches its sequence only until the sequence is
// released; afterwards every call rejects it with ErrStaleSequence, and
// another manager rejects it with ErrForeignSequence (both match
// ErrInvalidSequence), so a double release never drops a reference that
// another holder owns. The zero SeqID is never valid. SeqIDs are
// comparable and may be copied and sent to other goroutines.
type SeqID struct {
	gen uint64 // odd while the sequence is live
	idx uint32
	mgr uint32
}

// IsZero reports whether id is the zero SeqID.
func (id SeqID) IsZero() bool { return id == SeqID{} }

// String formats the id for debugging, as kv<manager>/seq<slot>@<generation>.
func (id SeqID) String() string {
	if id.IsZero() {
		return "kv.SeqID{}"
	}
	return fmt.Sprintf("kv%d/seq%d@%d", id.mgr, id.idx, id.gen)
}

// seqErr says why id is not a live sequence of manager mgr, whose slot
// id.idx exists when inRange and then has generation cur. A slot's
// generation only grows (odd while a sequence holds it), so an odd
// generation below cur is a sequence that ended, and one above it was
// never issued.
func seqErr(id SeqID, mgr uint32, inRange bool, cur uint64) error {
	switch {
	case id.IsZero():
		return ErrUnknownSequence
	case id.mgr != mgr:
		return ErrForeignSequence
	case !inRange || id.gen&1 == 0 || id.gen > cur:
		return ErrUnknownSequence
	}
	return ErrStaleSequence
}

// handle encodes id as a pool.Handle so that the release mailbox, which
// carries handles, can carry it. The handle never reaches a pool.
func (id SeqID) handle() pool.Handle {
	return relayHandle(relay.ID{Gen: id.gen, Slot: id.idx, Owner: id.mgr})
}

// seqOf decodes a handle made by SeqID.handle.
func seqOf(h pool.Handle) SeqID {
	id := relayID(h)
	return SeqID{gen: id.Gen, idx: id.Slot, mgr: id.Owner}
}

// relayHandle and relayID convert between a relay.ID and the handle that
// carries it.
func relayHandle(id relay.ID) (h pool.Handle) {
	b := id.Encode()
	_ = h.UnmarshalBinary(b[:]) // cannot fail: the length is a handle's
	return h
}

// The conversions need a relay.ID's encoding to be a handle's: this does
// not compile if the two lengths differ.
var _ = [1]struct{}{}[relay.Size-pool.HandleSize]

func relayID(h pool.Handle) relay.ID {
	var b [relay.Size]byte
	raw, _ := h.AppendBinary(b[:0])
	return relay.Decode(raw)
}

// Releaser releases finished sequences from a goroutine other than the
// owner: a worker that finished a request releases the whole sequence with
// one push, and the owner drops the references of its blocks at its next
// Drain. Release only hands the id over: it cannot validate it without
// synchronizing with the owner, so the owner validates each id when it
// drains, and rejects a stale, foreign or doubled one (Stats.
// RejectedReleases, and Drain's error) without touching any block.
//
// A Releaser belongs to one goroutine at a time; give each worker its own.
// A Release that returns nil happens before the Drain that applies it, so
// the owner sees every write the worker made to the blocks before. After
// Release the sequence is nobody's: neither the worker nor the owner may
// use it. The zero Releaser is not usable (its calls return pool.ErrClosed);
// make one with Manager.NewReleaser.
type Releaser struct {
	s relay.Sender[pool.Handle] // padded: each worker writes its own on every call
}

// Release hands the sequence id to the owner, one push that never waits. It
// fails with pool.ErrClosed once the releaser or its manager is closed.
func (r *Releaser) Release(id SeqID) error {
	if r == nil || r.s.Stopped() {
		return pool.ErrClosed
	}
	return r.s.Send(id.handle())
}

// Close retires the releaser: later calls fail with pool.ErrClosed, and
// what it released before still reaches the owner's next Drain. Close may
// be called more than once.
func (r *Releaser) Close() error {
	if r == nil {
		return nil
	}
	return r.s.Close()
}
