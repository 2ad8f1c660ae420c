package tier_test

import (
	"fmt"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// Store a block into a host tier and load it back, the copies running on
// the tier's workers and their completions applied by Drain.
func Example() {
	st, err := host.New(4096, 64) // 64 blocks of 4 KiB, exactly 256 KiB
	if err != nil {
		panic(err)
	}
	m, err := tier.New(st)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	k := tier.KeyOf([]byte("block hash"), 0)
	src := make([]byte, 4096)
	copy(src, "kv")
	if _, err := m.Store([]tier.Key{k}, [][]byte{src}); err != nil {
		panic(err)
	}
	fmt.Println(m.Lookup([]tier.Key{k}, nil)) // the copy may still run
	waitAll(m, 1)
	fmt.Println(m.Lookup([]tier.Key{k}, nil))

	dst := make([]byte, 4096)
	if _, err := m.Load([]tier.Key{k}, [][]byte{dst}); err != nil {
		panic(err)
	}
	waitAll(m, 1) // dst must not be read before this
	s := m.Stats()
	fmt.Println(string(dst[:2]), s.Bytes, s.Free+s.Evictable+s.StorePending+s.LoadPinned == s.Capacity)
	// Output:
	// [HIT_PENDING]
	// [HIT]
	// kv 262144 true
}

// waitAll drains until n jobs are done; an engine drains once per step
// instead.
func waitAll(m *tier.Manager, n int) {
	for n > 0 {
		done, _ := m.Drain(nil)
		n -= len(done)
	}
}
