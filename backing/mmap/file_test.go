package mmap_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
)

// shmDir is a tmpfs directory for shared files: /dev/shm where it exists,
// else the test's temporary directory (MAP_SHARED works on any file).
func shmDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "locus-mmap-test-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// A file mapping is sized exactly, shared: what one Backing writes, the
// next one over the same file reads, at the same block; the meta area sits
// before block 0 and is kept too.
func TestFileSharedAndKept(t *testing.T) {
	path := filepath.Join(shmDir(t), "region")
	const bs, n, meta = 1000, 5, 100
	b := newBacking(t, bs, n, mmap.WithFile(path), mmap.WithMeta(meta), mmap.WithPrefault())
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	if want := int64(page + bs*n); fi.Size() != want {
		t.Fatalf("file of %d bytes, want exactly %d", fi.Size(), want)
	}
	if got := len(b.Meta()); got != meta || cap(b.Meta()) != meta {
		t.Fatalf("Meta: %d bytes, want %d", got, meta)
	}
	if b.Path() != path || !b.Mapped() {
		t.Fatalf("Path %q Mapped %v", b.Path(), b.Mapped())
	}
	copy(b.Meta(), "meta")
	for i := range n {
		if blk := b.Block(i); !bytes.Equal(blk, make([]byte, bs)) {
			t.Fatalf("fresh block %d not zero", i)
		}
		b.Block(i)[0], b.Block(i)[bs-1] = byte(i+1), byte(i+10)
	}
	// The bytes are in the file, where the layout says.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw[:4]) != "meta" || raw[page+3*bs] != 4 || raw[page+4*bs-1] != 13 {
		t.Fatal("the file does not hold the blocks where the layout says")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := newBacking(t, bs, n, mmap.WithFile(path), mmap.WithMeta(meta))
	if string(b2.Meta()[:4]) != "meta" {
		t.Fatal("meta not kept")
	}
	for i := range n {
		if b2.Block(i)[0] != byte(i+1) || b2.Block(i)[bs-1] != byte(i+10) {
			t.Fatalf("block %d not kept", i)
		}
	}
}

// One owner at a time: a second Backing over a file that another holds
// fails with ErrFileLocked, in the same process too, and succeeds once the
// first is closed.
func TestFileLocked(t *testing.T) {
	path := filepath.Join(shmDir(t), "region")
	b := newBacking(t, 4096, 2, mmap.WithFile(path))
	if _, err := mmap.New(4096, 2, mmap.WithFile(path)); !errors.Is(err, mmap.ErrFileLocked) {
		t.Fatalf("second owner: %v, want ErrFileLocked", err)
	}
	_ = b.Close()
	b2 := newBacking(t, 4096, 2, mmap.WithFile(path))
	if b2.Len() != 2 {
		t.Fatal(b2.Len())
	}
}

func TestFileRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := mmap.New(4096, 2, mmap.WithFile(filepath.Join(t.TempDir(), "f")))
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("off Linux: %v", err)
		}
		return
	}
	dir := shmDir(t)
	path := filepath.Join(dir, "region")
	b := newBacking(t, 4096, 2, mmap.WithFile(path))
	_ = b.Close()
	cases := map[string][]mmap.Option{
		"another size":      {mmap.WithFile(path)}, // with 3 blocks below
		"empty path":        {mmap.WithFile("")},
		"meta without file": {mmap.WithMeta(10)},
		"zero meta":         {mmap.WithFile(filepath.Join(dir, "z")), mmap.WithMeta(0)},
		"with fallback":     {mmap.WithFile(filepath.Join(dir, "y")), mmap.WithFallback()},
		"with huge pages":   {mmap.WithFile(filepath.Join(dir, "x")), mmap.WithHugePages()},
	}
	for name, opts := range cases {
		if _, err := mmap.New(4096, 3, opts...); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 2*4096 {
		t.Errorf("the refused file was changed: %v %v", fi, err)
	}
	if _, err := mmap.New(4096, 2, mmap.WithFile(filepath.Join(dir, "no", "such", "dir"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
}

func TestFileConformance(t *testing.T) {
	dir := shmDir(t)
	i := 0
	conformance.TestBacking(t, func(t *testing.T) pool.Backing {
		i++
		path := filepath.Join(dir, "c"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		_ = os.Remove(path)
		return newBacking(t, 100, 37, mmap.WithFile(path), mmap.WithMeta(1))
	})
}
