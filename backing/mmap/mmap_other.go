//go:build !linux

package mmap

import (
	"errors"
	"fmt"
)

// canMap: this system has no mapping New can make (WithFallback takes Go
// heap memory instead).
const canMap = false

// errUnsupported is what every constructor returns off Linux.
var errUnsupported = fmt.Errorf("mmap: mapped backing is implemented on Linux only: %w", errors.ErrUnsupported)

func newBacking(blockSize, blocks, length, align int, cfg config) (*Backing, error) {
	return nil, errUnsupported
}

// The methods below are unreachable without a Backing from New; they exist
// so that the portable code compiles.

func (b *Backing) bind(node int) error { return errUnsupported }

func (b *Backing) placement() (int, error) { return -1, errUnsupported }

func unmap(mem []byte) error { return errUnsupported }

func hugePageSize() int { return 2 << 20 }

func nodes() ([]Node, error) { return nil, errUnsupported }

func newFileBacking(blockSize, blocks int, cfg config) (*Backing, error) {
	return nil, errUnsupported
}

func openView(path string) (*View, error) { return nil, errUnsupported }
