package adapters

import (
	"fmt"

	"github.com/locus-go/locus/internal/relay"
	"github.com/locus-go/locus/pool"
)

// Handle is one holder's claim on a hot adapter, returned by Acquire: the
// Manager, the lease's slot and the slot's generation. Every Acquire gets
// a lease of its own, so two holders of one adapter hold two handles, and
// releasing one handle twice is told apart from two holders releasing
// once: the second release finds the generation moved on and is rejected
// with ErrInvalidHandle, never dropping a reference another holder owns.
//
// The zero Handle is never valid. Handles are comparable and may be copied
// and sent to other goroutines (to release them through a Releaser).
type Handle struct {
	gen uint64 // odd while the lease is live
	idx uint32
	mgr uint32
}

// IsZero reports whether h is the zero Handle.
func (h Handle) IsZero() bool { return h == Handle{} }

// String formats the handle for debugging, as adapters<manager>/lease<slot>@<generation>.
func (h Handle) String() string {
	if h.IsZero() {
		return "adapters.Handle{}"
	}
	return fmt.Sprintf("adapters%d/lease%d@%d", h.mgr, h.idx, h.gen)
}

// handle encodes h as a pool.Handle, so the release mailbox (which carries
// handles) can carry it; it never reaches a pool.
func (h Handle) handle() pool.Handle {
	return relayHandle(relay.ID{Gen: h.gen, Slot: h.idx, Owner: h.mgr})
}

// relayHandle and relayID convert between a relay.ID and the handle that
// carries it through a mailbox.
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

// lease is one Acquire's claim.
type lease struct {
	gen     uint64 // odd while live
	adapter uint32
}
