//go:build linux

package disk_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/locus-go/locus/tier/disk"
)

// On a file system with fallocate (ext4, xfs, btrfs, tmpfs), a new tier's
// file has every byte allocated at Open: not sparse.
func TestPreallocated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t")
	d, err := disk.Open(path, bs, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts")
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(path, &fs); err == nil && fs.Type == 0x6969 { // NFS: may not preallocate
		t.Skip("NFS")
	}
	if got := st.Blocks * 512; got < fi.Size() {
		t.Errorf("%d of %d bytes allocated: sparse", got, fi.Size())
	}
}
