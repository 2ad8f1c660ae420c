package kv

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/cpu"

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
// carries handles, can carry it: the two have the same 16-byte encoding.
// The handle never reaches a pool.
func (id SeqID) handle() pool.Handle {
	var b [pool.HandleSize]byte
	binary.LittleEndian.PutUint64(b[:], id.gen)
	binary.LittleEndian.PutUint32(b[8:], id.idx)
	binary.LittleEndian.PutUint32(b[12:], id.mgr)
	var h pool.Handle
	_ = h.UnmarshalBinary(b[:]) // cannot fail: the length is right
	return h
}

// seqOf decodes a handle made by SeqID.handle.
func seqOf(h pool.Handle) SeqID {
	var b [pool.HandleSize]byte
	raw, _ := h.AppendBinary(b[:0])
	return SeqID{
		gen: binary.LittleEndian.Uint64(raw),
		idx: binary.LittleEndian.Uint32(raw[8:]),
		mgr: binary.LittleEndian.Uint32(raw[12:]),
	}
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
	// Each worker writes its own Releaser on every call (one, retired):
	// the pads keep two workers' releasers off one cache line.
	_       cpu.CacheLinePad
	prod    pool.Producer
	closed  *atomic.Bool // the manager's
	retired bool
	one     [1]pool.Handle
	_       cpu.CacheLinePad
}

// Release hands the sequence id to the owner, one push that never waits. It
// fails with pool.ErrClosed once the releaser or its manager is closed.
func (r *Releaser) Release(id SeqID) error {
	if r == nil || r.prod == nil || r.retired || r.closed.Load() {
		return pool.ErrClosed
	}
	r.one[0] = id.handle()
	return r.prod.Send(r.one[:])
}

// Close retires the releaser: later calls fail with pool.ErrClosed, and
// what it released before still reaches the owner's next Drain. Close may
// be called more than once.
func (r *Releaser) Close() error {
	if r == nil || r.prod == nil || r.retired {
		return nil
	}
	r.retired = true
	return r.prod.Close()
}
