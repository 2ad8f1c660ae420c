package cuda

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// DevicePtr is an address in a device's memory (a CUdeviceptr). It is a
// number, not a Go pointer: host code cannot dereference it by mistake, and
// the garbage collector ignores it. Get one from Region.Ptr, Backing.Ptr or
// pool.Pool.DeviceAddr, and hand it to a Copier.
type DevicePtr uintptr

// Add returns p advanced by n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

// Direction says which way a batch copies.
type Direction uint8

// The two directions of a batch.
const (
	// ToDevice copies host bytes into device memory (a load from a host
	// tier).
	ToDevice Direction = iota + 1
	// ToHost copies device memory into host bytes (an offload).
	ToHost
)

// String returns "to-device" or "to-host".
func (d Direction) String() string {
	switch d {
	case ToDevice:
		return "to-device"
	case ToHost:
		return "to-host"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Copy is one block of a batch: len(Host) bytes between Dev and Host, in the
// batch's direction. Host may be Go memory or a mapping (a registered mmap
// backing copies at DMA speed; other host memory is staged by the driver).
// It must stay untouched until the batch's job has finished.
type Copy struct {
	Dev  DevicePtr
	Host []byte
}

// MaxBatch is the most copies one batch takes.
const MaxBatch = 1 << 20

// xfer is one copy as addresses: n bytes between dev and host.
type xfer struct{ dev, host, n uint64 }

// span is one driver copy: n bytes from src to dst.
type span struct{ dst, src, n uint64 }

// coalesce validates a batch and turns it into as few driver copies as
// possible: it orders the copies by destination and merges a copy into the
// one before when both its source and its destination continue that one's.
// The destinations must not overlap (two copies racing into the same bytes
// would leave them undefined); sources may. xs is reordered. The spans are
// appended to out[:0].
func coalesce(dir Direction, xs []xfer, out []span) ([]span, error) {
	if dir != ToDevice && dir != ToHost {
		return out[:0], fmt.Errorf("%w: direction %v", ErrInvalidArgument, dir)
	}
	if len(xs) == 0 || len(xs) > MaxBatch {
		return out[:0], fmt.Errorf("%w: batch of %d copies, want 1 to %d", ErrInvalidArgument, len(xs), MaxBatch)
	}
	toDev := dir == ToDevice
	dst := func(x xfer) uint64 {
		if toDev {
			return x.dev
		}
		return x.host
	}
	for i, x := range xs {
		switch {
		case x.n == 0:
			return out[:0], fmt.Errorf("%w: copy %d is empty", ErrInvalidArgument, i)
		case x.dev == 0:
			return out[:0], fmt.Errorf("%w: copy %d has a nil device address", ErrInvalidArgument, i)
		case x.dev > math.MaxUint64-x.n || x.host > math.MaxUint64-x.n:
			return out[:0], fmt.Errorf("%w: copy %d wraps the address space", ErrInvalidArgument, i)
		}
	}
	slices.SortFunc(xs, func(a, b xfer) int { return cmp.Compare(dst(a), dst(b)) })
	out = out[:0]
	for i, x := range xs {
		d, s := x.dev, x.host
		if !toDev {
			d, s = x.host, x.dev
		}
		if i > 0 {
			last := &out[len(out)-1]
			switch end := last.dst + last.n; {
			case d < end:
				return out[:0], fmt.Errorf("%w: copies overlap at destination %#x", ErrInvalidArgument, d)
			case d == end && s == last.src+last.n:
				last.n += x.n
				continue
			}
		}
		out = append(out, span{dst: d, src: s, n: x.n})
	}
	return out, nil
}
