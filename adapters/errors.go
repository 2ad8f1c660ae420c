package adapters

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Errors of this package. Besides them a Manager returns pool.ErrClosed (a
// closed or zero Manager), pool.ErrInvalidConfig (a bad option) and errors
// wrapping pool.ErrInvalidArgument (an argument outside its domain), as the
// rest of locus does. Match them with errors.Is.
var (
	// ErrUnknown: the adapter id is not registered.
	ErrUnknown = fmt.Errorf("adapters: unknown adapter: %w", pool.ErrInvalidArgument)
	// ErrExists: Register of an id that is already registered.
	ErrExists = fmt.Errorf("adapters: adapter already registered: %w", pool.ErrInvalidArgument)
	// ErrInvalidHandle: Release or Bytes of a zero, forged, foreign, stale
	// or already released Handle. It matches pool.ErrInvalidHandle too. The
	// call changes nothing but the rejection count.
	ErrInvalidHandle = fmt.Errorf("adapters: invalid handle: %w", pool.ErrInvalidHandle)
	// ErrBusy: Unregister of an adapter that is held or loading.
	ErrBusy = errors.New("adapters: adapter is held or loading")
	// ErrLoading: Acquire of an adapter whose Prefetch is still in flight.
	// Drain, then retry: its completion makes the adapter hot.
	ErrLoading = errors.New("adapters: adapter is loading")
	// ErrNoRoom: the hot tier cannot take the adapter: its slot or byte
	// budget, or the pages region, is full of adapters that are held or
	// pinned (or of content the adapters may not evict). Nothing was
	// evicted that is still needed; release or unpin adapters and retry. It
	// matches pool.ErrExhausted.
	ErrNoRoom = fmt.Errorf("adapters: no room in the hot tier: %w", pool.ErrExhausted)
	// ErrTooLarge: Register of an adapter larger than a tier budget or
	// the pages region: it could never be made hot.
	ErrTooLarge = fmt.Errorf("adapters: adapter larger than a tier budget: %w", pool.ErrInvalidArgument)
	// ErrPinDuration: Pin with a duration that is not positive or exceeds
	// the Manager's maximum (WithMaxPin).
	ErrPinDuration = fmt.Errorf("adapters: pin duration out of range: %w", pool.ErrInvalidArgument)
	// ErrLoad: a Loader failed or delivered a different number of bytes
	// than the adapter's size. The adapter stays registered and cold.
	ErrLoad = errors.New("adapters: load failed")
	// ErrNotFinite: Quantize met an infinity or a NaN. A Manager then
	// keeps the warm copy exact.
	ErrNotFinite = fmt.Errorf("adapters: value not finite: %w", pool.ErrInvalidArgument)
)

// Short names for the pool errors this package returns.
var (
	errArg    = pool.ErrInvalidArgument
	errConfig = pool.ErrInvalidConfig
	errClosed = pool.ErrClosed
)
