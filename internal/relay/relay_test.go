package relay

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
)

// handle stands in for pool.Handle: the same 16-byte little-endian
// encoding, gen then index then pool.
type handle struct {
	gen       uint64
	idx, pool uint32
}

func (h handle) AppendBinary(b []byte) ([]byte, error) {
	b = binary.LittleEndian.AppendUint64(b, h.gen)
	b = binary.LittleEndian.AppendUint32(b, h.idx)
	return binary.LittleEndian.AppendUint32(b, h.pool), nil
}

func (h *handle) UnmarshalBinary(b []byte) error {
	if len(b) != Size {
		return errors.New("bad length")
	}
	h.gen, h.idx, h.pool = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
	return nil
}

func TestCodec(t *testing.T) {
	for _, id := range []ID{{}, {Gen: 1, Slot: 2, Owner: 3}, {Gen: ^uint64(0), Slot: ^uint32(0), Owner: ^uint32(0)}} {
		b := id.Encode()
		var h handle
		if err := h.UnmarshalBinary(b[:]); err != nil {
			t.Fatal(err)
		}
		if want := (handle{gen: id.Gen, idx: id.Slot, pool: id.Owner}); h != want {
			t.Errorf("%+v encodes as %+v, want %+v", id, h, want)
		}
		raw, _ := h.AppendBinary(nil)
		if got := Decode(raw); got != id {
			t.Errorf("Decode(Encode(%+v)) = %+v", id, got)
		}
	}
	if got := Decode([]byte{1, 2, 3}); got != (ID{}) {
		t.Errorf("Decode of 3 bytes = %+v, want the zero ID", got)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{1, 2, 3})
	f.Add(make([]byte, Size))
	f.Fuzz(func(t *testing.T, b []byte) {
		id := Decode(b)
		if len(b) < Size {
			if id != (ID{}) {
				t.Fatalf("Decode of %d bytes = %+v, want the zero ID", len(b), id)
			}
			return
		}
		if enc := id.Encode(); string(enc[:]) != string(b[:Size]) {
			t.Fatalf("Decode(%x) = %+v, which encodes as %x", b, id, enc)
		}
	})
}

// producer records what a Sender sends.
type producer struct {
	sent   []handle
	closes int
}

func (p *producer) Send(chunk []handle) error { p.sent = append(p.sent, chunk...); return nil }
func (p *producer) Close() error              { p.closes++; return nil }

func TestSender(t *testing.T) {
	var zero Sender[handle]
	var nilSender *Sender[handle]
	if !zero.Stopped() {
		t.Fatal("a zero Sender is not stopped")
	}
	if err := zero.Close(); err != nil {
		t.Fatalf("Close of a zero Sender = %v", err)
	}
	if err := nilSender.Close(); err != nil {
		t.Fatalf("Close of a nil Sender = %v", err)
	}

	var p producer
	var closed atomic.Bool
	var s Sender[handle]
	s.Init(&p, &closed)
	if s.Stopped() {
		t.Fatal("an initialised Sender is stopped")
	}
	for i := range 3 {
		if err := s.Send(handle{gen: uint64(2*i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.sent) != 3 || p.sent[2].gen != 5 {
		t.Fatalf("sent %+v, want three handles, the last of generation 5", p.sent)
	}
	closed.Store(true)
	if !s.Stopped() {
		t.Fatal("a Sender whose owner closed is not stopped")
	}
	// Close after the owner closed still retires the producer.
	if err := s.Close(); err != nil || !s.Stopped() || p.closes != 1 {
		t.Fatalf("Close: err %v, stopped %v, producer closes %d", err, s.Stopped(), p.closes)
	}
	if err := s.Close(); err != nil || p.closes != 1 {
		t.Fatalf("second Close: err %v, producer closes %d (want 1)", err, p.closes)
	}
}
