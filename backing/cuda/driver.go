package cuda

import (
	"fmt"
	"sync"
	"unsafe"
)

// libName is the driver library's soname: the CUDA driver installs it with
// the kernel module, without the toolkit.
const libName = "libcuda.so.1"

// apiVersion is the CUDA version whose entry points (and so whose argument
// lists) this package asks cuGetProcAddress for. The calls below have had
// the same ABI from CUDA 10.2 to 13.
const apiVersion = 12000

// batchVersion asks for cuMemcpyBatchAsync as CUDA 12.8 defined it, with its
// failIdx argument. CUDA 13 renamed a version without failIdx to
// cuMemcpyBatchAsync_v2; asking for 12080 gets the 12.8 ABI from 12.8 and
// 13.x drivers alike (vLLM's simple_kv_offload does the same).
const batchVersion = 12080

// procs are the driver entry points this package calls.
type procs struct {
	init, driverGetVersion, deviceGetCount, deviceGet, deviceGetName, deviceTotalMem uintptr
	primaryCtxRetain, primaryCtxRelease, ctxSetCurrent, ctxSynchronize               uintptr
	memGetGranularity, memAddressReserve, memAddressFree, memCreate, memRelease      uintptr
	memMap, memUnmap, memSetAccess, memsetD8                                         uintptr
	memHostRegister, memHostUnregister                                               uintptr
	streamCreate, streamDestroy, streamSynchronize                                   uintptr
	eventCreate, eventDestroy, eventRecord, eventQuery, eventSynchronize             uintptr
	memcpyHtoDAsync, memcpyDtoHAsync                                                 uintptr
	memcpyBatchAsync                                                                 uintptr // 0 before CUDA 12.8
}

// driver is the loaded library: its version and entry points.
type driver struct {
	version int // cuDriverGetVersion: 1000*major + 10*minor
	p       procs
}

var loaded struct {
	once sync.Once
	d    *driver
	err  error
}

// load opens and initialises the driver once per process.
func load() (*driver, error) {
	loaded.once.Do(func() { loaded.d, loaded.err = open() })
	return loaded.d, loaded.err
}

func open() (*driver, error) {
	lib, err := dlopen()
	if err != nil {
		return nil, err
	}
	d := &driver{}
	p := &d.p
	// cuInit and cuDriverGetVersion have kept their names since CUDA 2.
	if p.init = dlsym(lib, "cuInit"); p.init == 0 {
		return nil, fmt.Errorf("%w: %s has no cuInit", ErrNoDriver, libName)
	}
	if err := check("cuInit", call(p.init, 0)); err != nil {
		return nil, err
	}
	if p.driverGetVersion = dlsym(lib, "cuDriverGetVersion"); p.driverGetVersion == 0 {
		return nil, fmt.Errorf("%w: %s has no cuDriverGetVersion", ErrNoDriver, libName)
	}
	var v int32
	// Safe: &v is converted in the call expression (see call).
	if err := check("cuDriverGetVersion", call(p.driverGetVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		return nil, err
	}
	d.version = int(v)
	r := resolver{lib: lib, version: d.version}
	if r.proc = dlsym(lib, "cuGetProcAddress_v2"); r.proc != 0 && d.version >= 12000 {
		r.v2 = true
	} else {
		r.proc = dlsym(lib, "cuGetProcAddress") // CUDA 11.3+
	}
	for _, e := range []struct {
		fn       *uintptr
		name     string
		fallback string // the versioned symbol of the same ABI, for dlsym
	}{
		{&p.deviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount"},
		{&p.deviceGet, "cuDeviceGet", "cuDeviceGet"},
		{&p.deviceGetName, "cuDeviceGetName", "cuDeviceGetName"},
		{&p.deviceTotalMem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2"},
		{&p.primaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"},
		{&p.primaryCtxRelease, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"},
		{&p.ctxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent"},
		{&p.ctxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize"},
		{&p.memGetGranularity, "cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity"},
		{&p.memAddressReserve, "cuMemAddressReserve", "cuMemAddressReserve"},
		{&p.memAddressFree, "cuMemAddressFree", "cuMemAddressFree"},
		{&p.memCreate, "cuMemCreate", "cuMemCreate"},
		{&p.memRelease, "cuMemRelease", "cuMemRelease"},
		{&p.memMap, "cuMemMap", "cuMemMap"},
		{&p.memUnmap, "cuMemUnmap", "cuMemUnmap"},
		{&p.memSetAccess, "cuMemSetAccess", "cuMemSetAccess"},
		{&p.memsetD8, "cuMemsetD8", "cuMemsetD8_v2"},
		{&p.memHostRegister, "cuMemHostRegister", "cuMemHostRegister_v2"},
		{&p.memHostUnregister, "cuMemHostUnregister", "cuMemHostUnregister"},
		{&p.streamCreate, "cuStreamCreate", "cuStreamCreate"},
		{&p.streamDestroy, "cuStreamDestroy", "cuStreamDestroy_v2"},
		{&p.streamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize"},
		{&p.eventCreate, "cuEventCreate", "cuEventCreate"},
		{&p.eventDestroy, "cuEventDestroy", "cuEventDestroy_v2"},
		{&p.eventRecord, "cuEventRecord", "cuEventRecord"},
		{&p.eventQuery, "cuEventQuery", "cuEventQuery"},
		{&p.eventSynchronize, "cuEventSynchronize", "cuEventSynchronize"},
		{&p.memcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2"},
		{&p.memcpyDtoHAsync, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2"},
	} {
		if *e.fn = r.resolve(e.name, apiVersion, e.fallback); *e.fn == 0 {
			return nil, fmt.Errorf("%w: driver %s has no %s", ErrDriverTooOld, versionString(d.version), e.name)
		}
	}
	if d.version >= batchVersion {
		// The undecorated symbol keeps the 12.8 ABI in CUDA 13 (the new one
		// is cuMemcpyBatchAsync_v2), so it is the right fallback.
		p.memcpyBatchAsync = r.resolve("cuMemcpyBatchAsync", batchVersion, "cuMemcpyBatchAsync")
	}
	return d, nil
}

// resolver finds entry points as the driver versions them.
type resolver struct {
	lib     uintptr
	proc    uintptr // cuGetProcAddress(_v2), or 0 before CUDA 11.3
	v2      bool
	version int
}

// resolve asks cuGetProcAddress for name at the given CUDA version (capped
// at the driver's own) and falls back to dlsym of the versioned symbol.
func (r resolver) resolve(name string, version int, fallback string) uintptr {
	if r.proc != 0 {
		sym := append([]byte(name), 0)
		var fn uintptr
		var status int32
		v := uintptr(min(version, r.version))
		var res Result
		// Safe: the pointers are converted in the call expressions, and sym
		// is NUL-terminated.
		if r.v2 {
			res = call(r.proc, uintptr(unsafe.Pointer(&sym[0])), uintptr(unsafe.Pointer(&fn)), v, 0, uintptr(unsafe.Pointer(&status)))
		} else {
			res = call(r.proc, uintptr(unsafe.Pointer(&sym[0])), uintptr(unsafe.Pointer(&fn)), v, 0)
		}
		if res == resultSuccess && status == 0 && fn != 0 {
			return fn
		}
	}
	return dlsym(r.lib, fallback)
}

// versionString formats a cuDriverGetVersion number as major.minor.
func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
