package cuda

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Device is one GPU, opened on its primary context. Its methods may be
// called from any goroutine. Close it after everything made from it.
type Device struct {
	drv     *driver
	dev     int32 // CUdevice
	ordinal int
	ctx     uintptr // the retained primary CUcontext
	name    string
	memory  int64
	gran    int64 // cuMemCreate's granularity for this device

	mu     sync.Mutex
	closed bool
}

// Devices returns how many GPUs the driver sees. It fails with an error
// wrapping ErrNoDriver where there is no usable driver.
func Devices() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	var n int32
	// Safe: &n is converted in the call expression (see call).
	if err := check("cuDeviceGetCount", call(d.p.deviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Open loads the driver (once per process), and opens GPU ordinal (0 is
// the first) on its primary context. It fails with an error wrapping
// ErrNoDriver, ErrNoDevice or ErrDriverTooOld when it cannot; it never
// panics. Open the same ordinal once and share the Device.
func Open(ordinal int) (*Device, error) {
	drv, err := load()
	if err != nil {
		return nil, err
	}
	n, err := Devices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: ordinal %d, the driver sees %d", ErrNoDevice, ordinal, n)
	}
	d := &Device{drv: drv, ordinal: ordinal}
	p := &drv.p
	// Safe: each pointer is converted in its call expression (see call).
	if err := check("cuDeviceGet", call(p.deviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(ordinal))); err != nil {
		return nil, err
	}
	var name [256]byte
	if err := check("cuDeviceGetName", call(p.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	if i := bytes.IndexByte(name[:], 0); i >= 0 {
		d.name = string(name[:i])
	}
	var total uint64
	if err := check("cuDeviceTotalMem", call(p.deviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	d.memory = int64(total)
	if err := check("cuDevicePrimaryCtxRetain", call(p.primaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	prop := d.allocProp()
	var gran uint64
	err = d.do(func() error {
		return check("cuMemGetAllocationGranularity", call(p.memGetGranularity,
			uintptr(unsafe.Pointer(&gran)), uintptr(unsafe.Pointer(&prop)), granularityMinimum))
	})
	if err == nil && (gran == 0 || gran&(gran-1) != 0) {
		err = fmt.Errorf("cuda: the driver reports a granularity of %d bytes", gran)
	}
	if err != nil {
		call(p.primaryCtxRelease, uintptr(d.dev))
		return nil, err
	}
	d.gran = int64(gran)
	return d, nil
}

// Name returns the GPU's name, e.g. "NVIDIA H100 80GB HBM3".
func (d *Device) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// Ordinal returns the GPU's ordinal, as given to Open.
func (d *Device) Ordinal() int {
	if d == nil {
		return -1
	}
	return d.ordinal
}

// Memory returns the GPU's total memory in bytes.
func (d *Device) Memory() int64 {
	if d == nil {
		return 0
	}
	return d.memory
}

// Granularity returns the unit in which the driver maps device memory
// (2 MiB on current GPUs). Regions are rounded up to it.
func (d *Device) Granularity() int64 {
	if d == nil {
		return 0
	}
	return d.gran
}

// DriverVersion returns the CUDA version the driver supports, as
// cuDriverGetVersion reports it: 1000*major + 10*minor (12080 is 12.8).
func (d *Device) DriverVersion() int {
	if d == nil || d.drv == nil {
		return 0
	}
	return d.drv.version
}

// HasBatchCopy reports whether the driver has cuMemcpyBatchAsync (CUDA
// 12.8+), which copies a whole batch in one call.
func (d *Device) HasBatchCopy() bool {
	return d != nil && d.drv != nil && d.drv.p.memcpyBatchAsync != 0
}

// unusable reports a nil or zero Device (not made by Open): its calls fail
// with ErrClosed.
func (d *Device) unusable() bool { return d == nil || d.drv == nil }

// Close releases the primary context. Close regions, registrations and
// copiers first. Later calls do nothing.
func (d *Device) Close() error {
	if d.unusable() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return check("cuDevicePrimaryCtxRelease", call(d.drv.p.primaryCtxRelease, uintptr(d.dev)))
}

// do runs fn with the goroutine locked to its thread and the primary
// context current on that thread: one cuCtxSetCurrent per batch of calls.
// The context stays current on the thread afterwards, which is harmless: a
// later user of the thread sets its own.
func (d *Device) do(fn func() error) error {
	if d.unusable() {
		return fmt.Errorf("%w: a Device not made by Open", ErrClosed)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: device %d", ErrClosed, d.ordinal)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", call(d.drv.p.ctxSetCurrent, d.ctx)); err != nil {
		return err
	}
	return fn()
}

// The driver's enum values and structs used here, from cuda.h.
const (
	granularityMinimum   = 0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
	allocationTypePinned = 1 // CU_MEM_ALLOCATION_TYPE_PINNED
	locationTypeDevice   = 1 // CU_MEM_LOCATION_TYPE_DEVICE
	locationTypeHost     = 2 // CU_MEM_LOCATION_TYPE_HOST
	accessReadWrite      = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	hostRegisterPortable = 1 // CU_MEMHOSTREGISTER_PORTABLE
	streamNonBlocking    = 1 // CU_STREAM_NON_BLOCKING
	eventDisableTiming   = 2 // CU_EVENT_DISABLE_TIMING
	srcAccessOrderStream = 1 // CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
)

// memAllocationProp is CUmemAllocationProp (32 bytes on 64-bit platforms).
type memAllocationProp struct {
	typ                  uint32
	requestedHandleTypes uint32
	locType              int32
	locID                int32
	win32HandleMetaData  uintptr
	compressionType      uint8
	gpuDirectRDMACapable uint8
	usage                uint16
	reserved             [4]uint8
}

// memAccessDesc is CUmemAccessDesc (12 bytes).
type memAccessDesc struct {
	locType int32
	locID   int32
	flags   uint32
}

// memcpyAttributes is CUmemcpyAttributes of CUDA 12.8 (24 bytes).
type memcpyAttributes struct {
	srcAccessOrder uint32
	srcLocType     int32
	srcLocID       int32
	dstLocType     int32
	dstLocID       int32
	flags          uint32
}

func (d *Device) allocProp() memAllocationProp {
	return memAllocationProp{typ: allocationTypePinned, locType: locationTypeDevice, locID: int32(d.ordinal)}
}
