//go:build unix

package redis_test

import (
	"os"
	"syscall"
)

// pause stops a process as a stalled server is stopped (SIGSTOP); resume
// lets it go on (SIGCONT).
func pause(p *os.Process) error  { return p.Signal(syscall.SIGSTOP) }
func resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
