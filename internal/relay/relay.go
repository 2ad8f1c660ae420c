// Package relay is the worker side of a release path that reuses a block
// transport for ids that are not blocks: kv's sequence ids and adapters'
// lease handles are (generation, slot, owner) triples, the shape of a
// pool.Handle, so a chunk mailbox built for handles carries them, one push
// per release, to the owner that validates them at its next drain.
//
// It does not import pool: the handle type is a type parameter of the
// Sender, and the codec works on the handle's 16-byte binary encoding.
package relay

import (
	"encoding/binary"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// ID is what a release carries: the generation of the slot it names when
// it was issued, the slot, and the owner (a manager's id).
type ID struct {
	Gen   uint64
	Slot  uint32
	Owner uint32
}

// Size is the length of an ID's encoding, a block handle's.
const Size = 16

// Encode returns id's encoding, a block handle's: a pool.Handle
// unmarshalled from it carries id through a transport (it never reaches a
// pool). The conversion is left to the caller, whose concrete handle
// methods do not make the bytes escape.
func (id ID) Encode() [Size]byte {
	var b [Size]byte
	binary.LittleEndian.PutUint64(b[:], id.Gen)
	binary.LittleEndian.PutUint32(b[8:], id.Slot)
	binary.LittleEndian.PutUint32(b[12:], id.Owner)
	return b
}

// Decode returns the ID a handle's encoding carries: b is what
// AppendBinary wrote for a handle made from Encode. A b shorter than Size
// gives the zero ID, which never names a live slot.
func Decode(b []byte) ID {
	if len(b) < Size {
		return ID{}
	}
	return ID{
		Gen:   binary.LittleEndian.Uint64(b),
		Slot:  binary.LittleEndian.Uint32(b[8:]),
		Owner: binary.LittleEndian.Uint32(b[12:]),
	}
}

// Producer is one worker's end of the transport (a pool.Producer).
type Producer[H any] interface {
	Send(chunk []H) error
	Close() error
}

// Sender is one worker's releaser: it sends one handle per call through
// its own producer. Its worker writes it on every call, so it is padded on
// both sides: two workers' senders never share a cache line. A Sender
// belongs to one goroutine at a time and must not be copied after Init (a
// copy would share the producer).
//
// Happens-before: a Send that returns nil happens before the owner's drain
// that receives it (the transport's guarantee), so the owner sees every
// write the worker made before the release.
type Sender[H any] struct {
	_       cpu.CacheLinePad
	prod    Producer[H]
	closed  *atomic.Bool // the owner's: set once it closes
	retired bool
	one     [1]H
	_       cpu.CacheLinePad
}

// Init readies s, a zero Sender, to send through prod until closed is set.
func (s *Sender[H]) Init(prod Producer[H], closed *atomic.Bool) {
	s.prod, s.closed = prod, closed
}

// Stopped reports whether the sender may not send: Init did not ready it,
// it is retired, or its owner closed. Unlike Close it needs a non-nil s:
// the releasers hold their Sender by value.
func (s *Sender[H]) Stopped() bool {
	return s.prod == nil || s.retired || s.closed.Load()
}

// Send pushes h; the caller checks Stopped first.
func (s *Sender[H]) Send(h H) error {
	s.one[0] = h
	return s.prod.Send(s.one[:])
}

// Close retires the sender: Stopped is true afterwards, and what it sent
// before still reaches the owner. Close may be called more than once.
func (s *Sender[H]) Close() error {
	if s == nil || s.prod == nil || s.retired {
		return nil
	}
	s.retired = true
	return s.prod.Close()
}
