package cuda

import (
	"fmt"
	"unsafe"
)

// HostMemory is host memory that outlives its registration: a mapping such
// as *mmap.Backing, whose Span is the whole mapping.
type HostMemory interface {
	Span() (addr uintptr, length int)
}

// Registration is host memory page-locked and known to the driver, so that
// copies to and from it run by DMA without staging. Close it before the
// memory is unmapped.
type Registration struct {
	d      *Device
	addr   uintptr
	n      int
	closed bool
}

// Register page-locks the whole of m with cuMemHostRegister, at its exact
// size (no rounding to a power of two), for every context in the process
// (CU_MEMHOSTREGISTER_PORTABLE). It takes time in proportion to the size
// (the driver faults in and pins every page): call it when the host tier is
// built, off the serving path.
//
// It fails with an error wrapping ErrInvalidArgument for an empty span or
// memory that is already registered, ErrOutOfMemory when the pages cannot
// be locked, and errors.ErrUnsupported where the platform refuses (some
// sandboxes, gVisor among them, do not let the driver pin user memory).
func (d *Device) Register(m HostMemory) (*Registration, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil host memory", ErrInvalidArgument)
	}
	addr, n := m.Span()
	if addr == 0 || n <= 0 {
		return nil, fmt.Errorf("%w: host span %#x+%d", ErrInvalidArgument, addr, n)
	}
	err := d.do(func() error {
		return check("cuMemHostRegister", call(d.drv.p.memHostRegister, addr, uintptr(n), hostRegisterPortable))
	})
	if err != nil {
		return nil, err
	}
	return &Registration{d: d, addr: addr, n: n}, nil
}

// Len returns the number of bytes registered.
func (r *Registration) Len() int {
	if r == nil {
		return 0
	}
	return r.n
}

// Close unregisters the memory (cuMemHostUnregister), once; later calls do
// nothing. Copies from or to it must have finished.
func (r *Registration) Close() error {
	if r == nil || r.d == nil || r.closed {
		return nil
	}
	r.closed = true
	return r.d.do(func() error {
		return check("cuMemHostUnregister", call(r.d.drv.p.memHostUnregister, r.addr))
	})
}

// hostAddr returns the address of b's first byte. b is not empty.
func hostAddr(b []byte) uint64 {
	// Safe: the address is only a number handed to the driver; the Copier
	// keeps b reachable and pinned until its job has finished.
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
