//go:build !unix

package redis_test

import (
	"errors"
	"os"
)

// pause and resume need job-control signals, which only Unix has; the
// fault tests that use them run where redis-server does.
func pause(*os.Process) error  { return errors.ErrUnsupported }
func resume(*os.Process) error { return errors.ErrUnsupported }
