//go:build linux

package disk_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/locus-go/locus/tier/disk"
)

// BenchmarkIO stores and loads 512 KiB blocks through the tier, buffered
// and with O_DIRECT, beside plain pwrite/pread of the same bytes at the
// same offsets of the same file, with and without O_DIRECT: the limit
// each mode of the tier is held to. Buffered loads come from the page
// cache (the file is small and just written); direct loads from the
// device. Run it on the file system to measure (the test's temporary
// directory: set TMPDIR).
//
//	go test -run '^$' -bench BenchmarkIO -benchtime 2s ./tier/disk
func BenchmarkIO(b *testing.B) {
	const size, slots = 512 << 10, 64
	for _, mode := range modes {
		b.Run("impl=tier/mode="+mode.name, func(b *testing.B) {
			d, err := disk.Open(filepath.Join(b.TempDir(), "t"), size, slots, mode.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			buf := disk.AlignedBuf(size)
			for i := range buf {
				buf[i] = byte(i)
			}
			for s := range slots {
				if err := d.WriteSlot(s, key(s), 1, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("op=store", func(b *testing.B) {
				b.SetBytes(size)
				i := 0
				for b.Loop() {
					if err := d.WriteSlot(i%slots, key(i%slots), 1, buf); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("op=load", func(b *testing.B) {
				b.SetBytes(size)
				i := 0
				for b.Loop() {
					if err := d.ReadSlot(i%slots, key(i%slots), 1, buf); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("op=load/buf=unaligned", func(b *testing.B) {
				dst := make([]byte, size+1)[1:]
				b.SetBytes(size)
				i := 0
				for b.Loop() {
					if err := d.ReadSlot(i%slots, key(i%slots), 1, dst); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run("op=baseline-pwrite", func(b *testing.B) { raw(b, d, mode.opts, size, slots, true) })
			b.Run("op=baseline-pread", func(b *testing.B) { raw(b, d, mode.opts, size, slots, false) })
		})
	}
}

// raw moves the payload of each slot with one plain pwrite or pread on a
// second descriptor of the tier's file, opened in the same mode.
func raw(b *testing.B, d *disk.Tier, opts []disk.Option, size, slots int, write bool) {
	flag := os.O_RDWR
	if len(opts) > 0 {
		flag |= syscall.O_DIRECT
	}
	path := filepath.Join(filepath.Dir(d.Path()), "t")
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := disk.AlignedBuf(size)
	b.SetBytes(int64(size))
	i := 0
	for b.Loop() {
		off := d.Offset(i % slots)
		if write {
			_, err = f.WriteAt(buf, off)
		} else {
			_, err = f.ReadAt(buf, off)
		}
		if err != nil {
			b.Fatal(strconv.Itoa(i), err)
		}
		i++
	}
}
