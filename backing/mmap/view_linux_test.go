package mmap_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/pool"
)

// A path that is not a regular file is refused at once: a FIFO with no
// writer does not block the open, a directory does not map.
func TestViewNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, t.TempDir()} {
		if _, err := mmap.OpenView(p); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Fatalf("%s: %v, want ErrInvalidConfig", p, err)
		}
	}
}
