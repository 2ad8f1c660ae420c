//go:build !(linux && (amd64 || arm64))

package cuda

import (
	"errors"
	"fmt"
	"runtime"
)

var errPlatform = fmt.Errorf("%w: %w: backing/cuda runs on linux/amd64 and linux/arm64, not %s/%s",
	ErrNoDriver, errors.ErrUnsupported, runtime.GOOS, runtime.GOARCH)

func dlopen() (uintptr, error) { return 0, errPlatform }

func dlsym(uintptr, string) uintptr { return 0 }

// call is never reached: Open fails first on this platform.
func call(uintptr, ...uintptr) Result { return resultNotSupported }

func mapFence(int) ([]byte, error) { return nil, errPlatform }

func unmapFence([]byte) error { return errPlatform }
