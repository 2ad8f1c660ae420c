package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// Region is one contiguous range of device addresses with physical device
// memory mapped under it, read-write for its device. Its methods are for
// one goroutine at a time (the owner's), except Ptr and Size.
//
// Use a Region for device memory that a pool, a pages region or a kernel
// addresses directly; use NewBacking to hand one to pool.New or pages.New.
type Region struct {
	d      *Device
	base   DevicePtr
	size   int64
	handle uint64 // CUmemGenericAllocationHandle; 0 while asleep
	closed bool
}

// NewRegion reserves size bytes of device addresses, rounded up to the
// device's granularity, and maps zeroed physical memory under them. It fails
// with an error wrapping ErrInvalidArgument for a size that is not positive,
// ErrOutOfMemory when the device has no room, and ErrClosed after Close.
func (d *Device) NewRegion(size int64) (*Region, error) {
	if d.unusable() {
		return nil, fmt.Errorf("%w: a Device not made by Open", ErrClosed)
	}
	if size <= 0 || size > math.MaxInt64-d.gran {
		return nil, fmt.Errorf("%w: region of %d bytes", ErrInvalidArgument, size)
	}
	size = (size + d.gran - 1) &^ (d.gran - 1)
	r := &Region{d: d, size: size}
	err := d.do(func() error {
		// Safe: &r.base is converted in the call expression (see call).
		err := check("cuMemAddressReserve", call(d.drv.p.memAddressReserve,
			uintptr(unsafe.Pointer(&r.base)), uintptr(size), uintptr(d.gran), 0, 0))
		if err != nil {
			return err
		}
		if err := r.mapMemory(); err != nil {
			call(d.drv.p.memAddressFree, uintptr(r.base), uintptr(size))
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// mapMemory creates physical memory for the whole range, maps it, grants
// the device access and zeroes it. The caller has the context current.
func (r *Region) mapMemory() error {
	p := &r.d.drv.p
	prop := r.d.allocProp()
	var h uint64
	// Safe: the pointers are converted in the call expressions (see call).
	if err := check("cuMemCreate", call(p.memCreate, uintptr(unsafe.Pointer(&h)), uintptr(r.size), uintptr(unsafe.Pointer(&prop)), 0)); err != nil {
		return err
	}
	err := check("cuMemMap", call(p.memMap, uintptr(r.base), uintptr(r.size), 0, uintptr(h), 0))
	if err != nil {
		call(p.memRelease, uintptr(h))
		return err
	}
	access := memAccessDesc{locType: locationTypeDevice, locID: int32(r.d.ordinal), flags: accessReadWrite}
	err = check("cuMemSetAccess", call(p.memSetAccess, uintptr(r.base), uintptr(r.size), uintptr(unsafe.Pointer(&access)), 1))
	if err == nil {
		// Fresh blocks read as zero (the backing contract); the memset runs
		// on the legacy stream, so wait for it before a copier's stream
		// touches the memory.
		err = check("cuMemsetD8", call(p.memsetD8, uintptr(r.base), 0, uintptr(r.size)))
	}
	if err == nil {
		err = check("cuCtxSynchronize", call(p.ctxSynchronize))
	}
	if err != nil {
		call(p.memUnmap, uintptr(r.base), uintptr(r.size))
		call(p.memRelease, uintptr(h))
		return err
	}
	r.handle = h
	return nil
}

// unmapMemory unmaps and releases the physical memory, keeping the
// addresses. The caller has the context current.
func (r *Region) unmapMemory() error {
	p := &r.d.drv.p
	// Copies in flight on any stream must not find the memory gone.
	err := check("cuCtxSynchronize", call(p.ctxSynchronize))
	if err == nil {
		err = check("cuMemUnmap", call(p.memUnmap, uintptr(r.base), uintptr(r.size)))
	}
	if err == nil {
		err = check("cuMemRelease", call(p.memRelease, uintptr(r.handle)))
		r.handle = 0
	}
	return err
}

// Ptr returns the region's first device address; it never changes, also
// across Sleep and Wake.
func (r *Region) Ptr() DevicePtr {
	if r == nil {
		return 0
	}
	return r.base
}

// Size returns the region's size in bytes: what NewRegion was asked for,
// rounded up to the device's granularity.
func (r *Region) Size() int64 {
	if r == nil {
		return 0
	}
	return r.size
}

// Asleep reports whether Sleep released the region's memory.
func (r *Region) Asleep() bool { return r != nil && r.d != nil && r.handle == 0 && !r.closed }

// unusable reports a nil, zero (not made by NewRegion) or closed Region.
func (r *Region) unusable() bool { return r == nil || r.d == nil || r.closed }

// Sleep releases the region's physical memory and keeps its addresses, so
// that pointers to it (in block tables, CUDA graphs) stay valid for Wake. It
// waits for work in flight on the device first. The contents are lost; a
// copy or kernel that touches a sleeping region faults on the device. Sleep
// on a sleeping region does nothing.
func (r *Region) Sleep() error {
	if r.unusable() {
		return ErrClosed
	}
	if r.handle == 0 {
		return nil
	}
	return r.d.do(r.unmapMemory)
}

// Wake maps fresh, zeroed physical memory at the region's addresses. It
// fails with an error wrapping ErrOutOfMemory when the device has no room
// (the region stays asleep). Wake on an awake region does nothing.
func (r *Region) Wake() error {
	if r.unusable() {
		return ErrClosed
	}
	if r.handle != 0 {
		return nil
	}
	return r.d.do(r.mapMemory)
}

// Close releases the memory and the addresses. Later calls do nothing.
func (r *Region) Close() error {
	if r.unusable() {
		return nil
	}
	err := r.d.do(func() error {
		var err error
		if r.handle != 0 {
			err = r.unmapMemory()
		}
		if e := check("cuMemAddressFree", call(r.d.drv.p.memAddressFree, uintptr(r.base), uintptr(r.size))); err == nil {
			err = e
		}
		return err
	})
	r.closed = true
	return err
}
