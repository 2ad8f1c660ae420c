package adapters

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// A Loader reads an adapter's weights from where they rest: the cold tier.
// The Manager calls Load when the adapter has no copy in the hot or warm
// tier, on the owner goroutine (Acquire, Pin) or on a copy worker
// (Prefetch), so Load must be safe to call from any goroutine, one call at
// a time per adapter.
//
// Use File, ReaderAt or Func; implement Loader for another source (an
// object store). To keep local copies of adapters whose Loader is slow, put
// a cold tier in front of it (WithCold) rather than a Loader over a tier.
type Loader interface {
	// Size is the adapter's size in bytes; it must not change.
	Size() int64
	// Load fills dst (Size bytes) with the weights. An error, or fewer
	// bytes than len(dst), makes the load fail with ErrLoad.
	Load(dst []byte) (int, error)
}

// File returns a Loader that reads the whole file at path on every load,
// opening it each time (so 10,000 registered adapters hold no descriptors).
// Its size is taken now; a load after the file changed size fails with
// ErrLoad.
func File(path string) (Loader, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("adapters: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() <= 0 {
		return nil, fmt.Errorf("%w: adapters: %s is not a non-empty regular file", errArg, path)
	}
	return &fileLoader{path: path, size: fi.Size()}, nil
}

type fileLoader struct {
	path string
	size int64
}

func (f *fileLoader) Size() int64 { return f.size }

func (f *fileLoader) Load(dst []byte) (int, error) {
	fd, err := os.Open(f.path)
	if err != nil {
		return 0, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() != f.size {
		return 0, fmt.Errorf("adapters: %s changed size from %d to %d bytes", f.path, f.size, fi.Size())
	}
	return readFull(fd, dst)
}

// ReaderAt returns a Loader that reads size bytes from offset 0 of r on
// every load. r must allow concurrent ReadAt calls (as os.File and
// bytes.Reader do).
func ReaderAt(r io.ReaderAt, size int64) (Loader, error) {
	if r == nil || size <= 0 {
		return nil, fmt.Errorf("%w: adapters: ReaderAt needs a reader and a positive size", errArg)
	}
	return &readerAtLoader{r: r, size: size}, nil
}

type readerAtLoader struct {
	r    io.ReaderAt
	size int64
}

func (l *readerAtLoader) Size() int64 { return l.size }

func (l *readerAtLoader) Load(dst []byte) (int, error) { return readFull(l.r, dst) }

// readFull reads len(dst) bytes from offset 0; io.EOF with every byte read
// is success, as io.ReaderAt allows.
func readFull(r io.ReaderAt, dst []byte) (int, error) {
	n, err := r.ReadAt(dst, 0)
	if n == len(dst) && (err == nil || errors.Is(err, io.EOF)) {
		return n, nil
	}
	return n, err
}

// Func returns a Loader that calls fn to fill a buffer of size bytes: for
// weights that come from code (a decoder, a network fetch, a test). fn
// returns how many bytes it wrote.
func Func(size int64, fn func(dst []byte) (int, error)) (Loader, error) {
	if fn == nil || size <= 0 {
		return nil, fmt.Errorf("%w: adapters: Func needs a function and a positive size", errArg)
	}
	return funcLoader{fn: fn, size: size}, nil
}

type funcLoader struct {
	fn   func([]byte) (int, error)
	size int64
}

func (l funcLoader) Size() int64 { return l.size }

func (l funcLoader) Load(dst []byte) (int, error) { return l.fn(dst) }

// load runs a loader into dst and turns every failure into ErrLoad. A
// panicking loader is a failure too, never a crash of the worker.
func load(l Loader, dst []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: loader panicked: %v", ErrLoad, r)
		}
	}()
	n, lerr := l.Load(dst)
	if lerr != nil {
		return fmt.Errorf("%w: %w", ErrLoad, lerr)
	}
	if n != len(dst) {
		return fmt.Errorf("%w: loader delivered %d bytes, want %d", ErrLoad, n, len(dst))
	}
	return nil
}

// maxSize bounds an adapter's size: it must index a Go slice on every
// platform.
const maxSize = math.MaxInt32
