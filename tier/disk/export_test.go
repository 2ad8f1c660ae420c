package disk

import (
	"os"
	"syscall"
	"time"
)

// SetWriteChunk splits payload writes into pwrites of n bytes, so a crash
// lands mid-payload more often.
func (t *Tier) SetWriteChunk(n int, pause time.Duration) { t.writeChunk, t.chunkPause = n, pause }

// ParseHeader exposes the slot header parser to the tests.
func ParseHeader(b []byte) error { _, err := parseHeader(b); return err }

// Offset is slot's offset in the file.
func (t *Tier) Offset(slot int) int64 { return t.offset(slot) }

// HeaderOffset is the offset of slot's header in the file.
func (t *Tier) HeaderOffset(slot int) int64 { return t.offset(slot) + int64(payloadSpan(t.bs)) }

// RefuseDirect makes Open's O_DIRECT open fail with EINVAL, as tmpfs did
// before Linux 6.6, until restore is called.
func RefuseDirect() (restore func()) {
	old := sysOpen
	sysOpen = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if oDirect != 0 && flag&oDirect != 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EINVAL}
		}
		return old(name, flag, perm)
	}
	return func() { sysOpen = old }
}

// Aligned reports whether b is a buffer direct I/O takes as it is.
func Aligned(b []byte) bool { return aligned(b) }

// AlignedBuf is alignedBuf.
func AlignedBuf(n int) []byte { return alignedBuf(n) }

// Path is the tier's file.
func (t *Tier) Path() string { return t.path }
