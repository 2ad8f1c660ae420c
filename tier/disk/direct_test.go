package disk_test

import (
	"bytes"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
)

// Every way a block meets O_DIRECT round-trips: an aligned buffer of whole
// pages (straight to the device, with its header page), an unaligned one
// (through a bounce slot), in either direction, and a block that is not
// whole pages.
func TestDirectIOBuffers(t *testing.T) {
	for _, size := range []int{bs, 5000} {
		path := filepath.Join(t.TempDir(), "t")
		d, err := disk.Open(path, size, 4, disk.WithDirectIO())
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS == "linux" && !d.DirectIO() {
			t.Fatalf("no O_DIRECT on the test's temporary directory")
		}
		alignedBuf := disk.AlignedBuf((size + 4095) / 4096 * 4096)[:size]
		if !disk.Aligned(disk.AlignedBuf(8192)) || disk.Aligned(make([]byte, 8193)[1:]) {
			t.Fatal("alignment check")
		}
		unaligned := make([]byte, size+1)[1:]
		bufs := map[string][]byte{"aligned": alignedBuf, "unaligned": unaligned}
		slot := 0
		for wname, src := range bufs {
			for rname, dst := range bufs {
				k := key(slot)
				want := bytes.Repeat([]byte{byte(slot + 1), 0x5A, 0xC3}, size/3+1)[:size]
				copy(src, want)
				if err := d.WriteSlot(slot, k, 3, src); err != nil {
					t.Fatalf("%d bytes, write %s: %v", size, wname, err)
				}
				clear(dst)
				if err := d.ReadSlot(slot, k, 3, dst); err != nil || !bytes.Equal(dst, want) {
					t.Fatalf("%d bytes, write %s, read %s: %v", size, wname, rname, err)
				}
				if err := d.ReadSlot(slot, k, 4, dst); err == nil {
					t.Fatalf("%d bytes: read %s served a stale generation", size, rname)
				}
				slot++
			}
		}
		_ = d.Close()
		// Reopened buffered, the file reads the same: one format.
		d, err = disk.Open(path, size, 4)
		if err != nil {
			t.Fatal(err)
		}
		if r := d.Recovery(); r.Recovered != 4 {
			t.Fatalf("%d bytes: reopened buffered: %+v", size, r)
		}
		_ = d.Close()
	}
}

// Where the file system refuses O_DIRECT at open, Open falls back to
// buffered I/O, and says so.
func TestDirectIOFallback(t *testing.T) {
	restore := disk.RefuseDirect()
	defer restore()
	path := filepath.Join(t.TempDir(), "t")
	d, err := disk.Open(path, bs, 4, disk.WithDirectIO())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.DirectIO() {
		t.Fatal("DirectIO after O_DIRECT was refused")
	}
	k := key(1)
	if err := d.WriteSlot(1, k, 2, block(k)); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, bs)
	if err := d.ReadSlot(1, k, 2, dst); err != nil || !bytes.Equal(dst, block(k)) {
		t.Fatal(err)
	}
}

// The tier suite in direct mode, with blocks of whole pages and not, and
// in the fallback.
func TestTierDirect(t *testing.T) {
	for _, size := range []int{4096, 1000} {
		conformance.TestTier(t, func(t *testing.T) *tier.Manager {
			st, err := disk.Open(filepath.Join(t.TempDir(), "tier"), size, 24, disk.WithDirectIO())
			if err != nil {
				t.Fatal(err)
			}
			m, err := tier.New(st, tier.WithWorkers(3))
			if err != nil {
				t.Fatal(err)
			}
			return m
		})
	}
}

func TestTierDirectFallback(t *testing.T) {
	restore := disk.RefuseDirect()
	defer restore()
	conformance.TestTier(t, func(t *testing.T) *tier.Manager {
		st, err := disk.Open(filepath.Join(t.TempDir(), "tier"), 1000, 24, disk.WithDirectIO())
		if err != nil {
			t.Fatal(err)
		}
		if st.DirectIO() {
			t.Fatal("O_DIRECT after a refusal")
		}
		m, err := tier.New(st, tier.WithWorkers(3))
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// OpenFile opens a file beside a tier as Open opens the tier's: with
// O_DIRECT where asked and taken (then aligned writes and reads round
// trip), buffered where refused or not asked.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	probe, err := disk.Open(filepath.Join(dir, "probe"), bs, 1, disk.WithDirectIO())
	if err != nil {
		t.Fatal(err)
	}
	takes := probe.DirectIO() // what this system and file system do
	_ = probe.Close()
	for _, c := range []struct {
		name          string
		direct, taken bool
		refuse        bool
	}{
		{"buffered", false, false, false},
		{"direct", true, takes, false},
		{"direct refused", true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.refuse {
				defer disk.RefuseDirect()()
			}
			f, direct, err := disk.OpenFile(filepath.Join(dir, c.name), c.direct)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if direct != c.taken {
				t.Fatalf("O_DIRECT %v, want %v", direct, c.taken)
			}
			buf := disk.AlignedBuf(4096)
			copy(buf, "locus")
			if _, err := f.WriteAt(buf, 4096); err != nil {
				t.Fatal(err)
			}
			got := disk.AlignedBuf(4096)
			if _, err := f.ReadAt(got, 4096); err != nil || !bytes.Equal(got, buf) {
				t.Fatalf("read back: %v", err)
			}
		})
	}
}
