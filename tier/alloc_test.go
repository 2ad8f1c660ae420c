package tier_test

import (
	"testing"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// TestLoadAllocs: a Load of resident blocks and the Drain that reports it
// allocate nothing once the job record has been used (its buffers, keys,
// generations and copy-time cell are kept from one job to the next).
func TestLoadAllocs(t *testing.T) {
	st, err := host.New(64, 16, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	m, err := tier.New(st, tier.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ks := []tier.Key{key(1), key(2), key(3)}
	bufs := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
	done := make([]tier.Done, 0, 4)
	drain := func() {
		for {
			done, _ = m.Drain(done[:0])
			if len(done) > 0 {
				if !done[0].OK {
					t.Fatal(done[0].Err)
				}
				return
			}
		}
	}
	if _, err := m.Store(ks, bufs); err != nil {
		t.Fatal(err)
	}
	drain()
	if a := testing.AllocsPerRun(100, func() {
		if _, err := m.Load(ks, bufs); err != nil {
			t.Fatal(err)
		}
		drain()
	}); a != 0 {
		t.Fatalf("%v allocs per Load and Drain", a)
	}
}
