//go:build linux && (amd64 || arm64)

package cuda

import (
	"fmt"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

func dlopen() (uintptr, error) {
	h, err := purego.Dlopen(libName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, fmt.Errorf("%w: dlopen %s: %v", ErrNoDriver, libName, err)
	}
	return h, nil
}

// dlsym returns the address of a symbol of the library, or 0.
func dlsym(lib uintptr, name string) uintptr {
	p, err := purego.Dlsym(lib, name)
	if err != nil {
		return 0
	}
	return p
}

// call calls the C function fn with integer and pointer arguments and
// returns its CUresult. Callers convert Go pointers with
// uintptr(unsafe.Pointer(p)) in the call expression itself: the
// uintptrescapes directive then keeps what they point to alive, on the
// heap, until call returns, as unsafe.Pointer rule 4 allows for syscalls.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(uint32(r)))
}

// mapFence reserves n bytes of host address space that no access may touch
// (PROT_NONE, no swap reserved): the stand-in that Backing.Block returns.
func mapFence(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("cuda: reserve %d bytes of host address space: %w", n, err)
	}
	return b, nil
}

func unmapFence(b []byte) error { return unix.Munmap(b) }
