package mmap_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/pool"
)

// A View sees the owner's writes as they happen, at the owner's layout
// (meta area rounded to Align, then the blocks), while the owner holds
// the file's lock; it refuses empty and missing files.
func TestView(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := mmap.OpenView("x"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("off Linux: %v", err)
		}
		return
	}
	path := filepath.Join(shmDir(t), "region")
	const bs, n, meta = 1000, 3, 100
	b := newBacking(t, bs, n, mmap.WithFile(path), mmap.WithMeta(meta))
	v, err := mmap.OpenView(path)
	if err != nil {
		t.Fatal(err)
	}
	if v.Path() != path || v.Align() != os.Getpagesize() {
		t.Fatalf("Path %q, Align %d", v.Path(), v.Align())
	}
	off := (meta + v.Align() - 1) / v.Align() * v.Align()
	if len(v.Bytes()) != off+bs*n {
		t.Fatalf("view of %d bytes, want %d", len(v.Bytes()), off+bs*n)
	}
	copy(b.Meta(), "meta")
	copy(b.Block(2), "block two")
	if got := string(v.Bytes()[:4]); got != "meta" {
		t.Fatalf("meta through the view: %q", got)
	}
	if got := string(v.Bytes()[off+2*bs : off+2*bs+9]); got != "block two" {
		t.Fatalf("block 2 through the view: %q", got)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if v.Bytes() != nil || v.Close() != nil {
		t.Fatal("a closed view keeps its bytes or fails a second Close")
	}

	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mmap.OpenView(empty); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := mmap.OpenView(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	var nilView *mmap.View
	if nilView.Bytes() != nil || nilView.Align() != 0 || nilView.Path() != "" || nilView.Close() != nil {
		t.Fatal("nil view")
	}
}
