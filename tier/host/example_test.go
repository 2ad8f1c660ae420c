//go:build linux && (amd64 || 386)

package host_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// An engine owns a host tier in a shared file; a second process (here, the
// same one) attaches as a peer and reads the rows the engine's LoadPlan
// names. Read returns the key of the block it copied, or ErrChanged if the
// owner rewrote the row under it.
func ExampleAttach() {
	dir := "/dev/shm" // a tmpfs
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("locus-example-host-%d", os.Getpid()))
	defer os.Remove(path)
	st, err := host.New(4096, 8, host.WithSharedFile(path))
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := tier.New(st)
	defer m.Close()
	k := tier.KeyOf([]byte("block 0 of a prompt"), 0)
	_, _ = m.Store([]tier.Key{k}, [][]byte{make([]byte, 4096)})
	for done := 0; done == 0; { // once per engine step
		d, _ := m.Drain(nil)
		done = len(d)
	}

	plan, _ := m.PrepareLoad([]tier.Key{k}) // the owner pins the row
	peer, err := host.Attach(path)          // in the reading process
	if err != nil {
		fmt.Println(err)
		return
	}
	defer peer.Close()
	dst := make([]byte, peer.BlockSize())
	got, _, err := peer.Read(plan.Slots[0], dst)
	fmt.Println(got == k, err)
	_ = m.CompleteLoad(plan.Job) // the peers are done
	// Output: true <nil>
}
