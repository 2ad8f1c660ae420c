package cuda

import (
	"errors"
	"fmt"
	"strconv"
)

// The sentinel errors. Test with errors.Is: driver failures (*Error) match
// the sentinel their CUresult belongs to.
var (
	// ErrNoDriver: libcuda.so.1 is not installed, cannot be loaded, or the
	// kernel driver does not answer (a stub library, a driver/library
	// mismatch, or an unsupported platform).
	ErrNoDriver = errors.New("cuda: no usable CUDA driver")
	// ErrNoDevice: the driver sees no GPU, or not the one asked for.
	ErrNoDevice = errors.New("cuda: no such CUDA device")
	// ErrOutOfMemory: the device (or page-locked host memory) is exhausted.
	ErrOutOfMemory = errors.New("cuda: out of memory")
	// ErrDriverTooOld: the driver lacks an entry point this package needs.
	ErrDriverTooOld = errors.New("cuda: driver too old")
	// ErrInvalidArgument: an argument was rejected before or by the driver.
	ErrInvalidArgument = errors.New("cuda: invalid argument")
	// ErrClosed: the device, region, registration or copier was closed.
	ErrClosed = errors.New("cuda: closed")
	// ErrJob: a copy job id is stale (already reported), forged or from
	// another copier.
	ErrJob = errors.New("cuda: unknown copy job")
)

// Result is a CUresult, the status code of a driver call.
type Result int32

// The CUresult codes this package names. The driver has more; Result.String
// prints those by number.
const (
	resultSuccess              Result = 0
	resultInvalidValue         Result = 1
	resultOutOfMemory          Result = 2
	resultNotInitialized       Result = 3
	resultDeinitialized        Result = 4
	resultStubLibrary          Result = 34
	resultInsufficientDriver   Result = 35
	resultNoDevice             Result = 100
	resultInvalidDevice        Result = 101
	resultInvalidContext       Result = 201
	resultOperatingSystem      Result = 304
	resultInvalidHandle        Result = 400
	resultNotFound             Result = 500
	resultNotReady             Result = 600
	resultIllegalAddress       Result = 700
	resultHostAlreadyReg       Result = 712
	resultHostNotReg           Result = 713
	resultNotPermitted         Result = 800
	resultNotSupported         Result = 801
	resultSystemNotReady       Result = 802
	resultSystemDriverMismatch Result = 803
	resultCompatNotSupported   Result = 804
	resultUnknown              Result = 999
)

var resultNames = map[Result]string{
	resultSuccess:              "CUDA_SUCCESS",
	resultInvalidValue:         "CUDA_ERROR_INVALID_VALUE",
	resultOutOfMemory:          "CUDA_ERROR_OUT_OF_MEMORY",
	resultNotInitialized:       "CUDA_ERROR_NOT_INITIALIZED",
	resultDeinitialized:        "CUDA_ERROR_DEINITIALIZED",
	resultStubLibrary:          "CUDA_ERROR_STUB_LIBRARY",
	resultInsufficientDriver:   "CUDA_ERROR_INSUFFICIENT_DRIVER",
	resultNoDevice:             "CUDA_ERROR_NO_DEVICE",
	resultInvalidDevice:        "CUDA_ERROR_INVALID_DEVICE",
	resultInvalidContext:       "CUDA_ERROR_INVALID_CONTEXT",
	resultOperatingSystem:      "CUDA_ERROR_OPERATING_SYSTEM",
	resultInvalidHandle:        "CUDA_ERROR_INVALID_HANDLE",
	resultNotFound:             "CUDA_ERROR_NOT_FOUND",
	resultNotReady:             "CUDA_ERROR_NOT_READY",
	resultIllegalAddress:       "CUDA_ERROR_ILLEGAL_ADDRESS",
	resultHostAlreadyReg:       "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	resultHostNotReg:           "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	resultNotPermitted:         "CUDA_ERROR_NOT_PERMITTED",
	resultNotSupported:         "CUDA_ERROR_NOT_SUPPORTED",
	resultSystemNotReady:       "CUDA_ERROR_SYSTEM_NOT_READY",
	resultSystemDriverMismatch: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	resultCompatNotSupported:   "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	resultUnknown:              "CUDA_ERROR_UNKNOWN",
}

// String returns the CUresult's name from cuda.h, or CUresult(n).
func (r Result) String() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return "CUresult(" + strconv.Itoa(int(r)) + ")"
}

// sentinel returns the sentinel error a CUresult belongs to, or nil.
func (r Result) sentinel() error {
	switch r {
	case resultOutOfMemory:
		return ErrOutOfMemory
	case resultNoDevice, resultInvalidDevice:
		return ErrNoDevice
	case resultStubLibrary, resultInsufficientDriver, resultSystemDriverMismatch,
		resultCompatNotSupported, resultNotInitialized, resultDeinitialized, resultSystemNotReady:
		return ErrNoDriver
	case resultInvalidValue, resultHostAlreadyReg, resultHostNotReg:
		return ErrInvalidArgument
	case resultNotSupported, resultNotPermitted:
		return errors.ErrUnsupported
	}
	return nil
}

// Error is a failed driver call.
type Error struct {
	Op   string // the driver entry point, e.g. "cuMemCreate"
	Code Result
}

// Error returns "cuda: <op>: <CUresult name> (<code>)".
func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %v (%d)", e.Op, e.Code, int32(e.Code))
}

// Is reports whether target is the sentinel error the code belongs to.
func (e *Error) Is(target error) bool {
	s := e.Code.sentinel()
	return s != nil && s == target
}

// check returns nil for CUDA_SUCCESS and an *Error otherwise.
func check(op string, r Result) error {
	if r == resultSuccess {
		return nil
	}
	return &Error{Op: op, Code: r}
}
