package pool

import "fmt"

// DeviceBacking is a Backing whose memory is not host memory (device memory,
// as backing/cuda's): Block returns a host stand-in the pool can hand out but
// nobody may touch, and DeviceAddr the block's real address.
type DeviceBacking interface {
	Backing
	// DeviceAddr returns the address of block i in the backing's own
	// address space, 0 <= i < Len().
	DeviceAddr(i int) uintptr
}

// DeviceAddr returns the device address of a live block of a pool over a
// DeviceBacking, validating h as Bytes does. It fails with an error wrapping
// ErrInvalidConfig if the pool's backing is not a DeviceBacking.
func (p *Pool[B, T, P]) DeviceAddr(h Handle) (uintptr, error) {
	if p == nil {
		return 0, errNilPool
	}
	db, ok := any(p.b).(DeviceBacking)
	if !ok {
		return 0, fmt.Errorf("%w: backing %T has no device addresses", ErrInvalidConfig, p.b)
	}
	if !p.c.valid(h) {
		return 0, p.c.reject(h)
	}
	return db.DeviceAddr(int(h.idx)), nil
}
