package mmap

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/locus-go/locus/pool"
)

func openView(path string) (*View, error) {
	// O_NONBLOCK: a FIFO or a device at path must not block the open;
	// it is refused below. It changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	defer f.Close() // the mapping holds the file, not f
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: mmap: %s is not a regular file (%v)", pool.ErrInvalidConfig, path, fi.Mode().Type())
	}
	size := fi.Size()
	if size <= 0 || size > int64(maxInt) {
		return nil, fmt.Errorf("%w: mmap: %s holds %d bytes", pool.ErrInvalidConfig, path, size)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, err)
	}
	var st unix.Statfs_t
	var p unsafe.Pointer
	var serr, merr error
	if cerr := rc.Control(func(fd uintptr) {
		if serr = unix.Fstatfs(int(fd), &st); serr == nil {
			p, merr = sysMmap(int(fd), 0, nil, uintptr(size), unix.PROT_READ, unix.MAP_SHARED)
		}
	}); cerr != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, cerr)
	}
	if serr != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, serr)
	}
	if merr != nil {
		return nil, fmt.Errorf("mmap: mapping %d bytes of %s: %w", size, path, merr)
	}
	align := os.Getpagesize()
	if uint32(st.Type) == hugetlbfsMagic && int(st.Bsize) > align {
		align = int(st.Bsize)
	}
	// size bytes are mapped read-only at p, outside the Go heap, until
	// Close unmaps exactly them.
	return &View{mem: unsafe.Slice((*byte)(p), int(size)), align: align, path: path}, nil
}
