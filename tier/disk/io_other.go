//go:build !linux

package disk

import (
	"os"
	"syscall"
)

// preallocate sizes the file: a sparse Truncate (no fallocate here).
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }

// writev writes bufs, in order, at off: one pwrite each.
func writev(f *os.File, _ syscall.RawConn, bufs [][]byte, off int64) error {
	for _, b := range bufs {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

// readv fills bufs, in order, from off: one pread each.
func readv(f *os.File, _ syscall.RawConn, bufs [][]byte, off int64) error {
	for _, b := range bufs {
		if _, err := f.ReadAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

// oDirect is 0: direct I/O is implemented on Linux only; WithDirectIO
// falls back to buffered I/O here.
const oDirect = 0
