package tier_test

import (
	"testing"

	"github.com/locus-go/locus/tier"
)

// TestLoadAllocs: a Load of resident blocks and the Drain that reports it
// allocate nothing once the job record has been used (its buffers, keys,
// generations and copy-time cell are kept from one job to the next).
func TestLoadAllocs(t *testing.T) {
	m := newManagerSized(t, 64, 16, tier.WithWorkers(1))
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

// TestStoreKeepsItsKeys: a caller that reuses the plan's Keys right after
// Store does not change what the copy stores: the worker reads the job's
// own copy of the keys.
func TestStoreKeepsItsKeys(t *testing.T) {
	m := newManagerSized(t, 64, 16, tier.WithWorkers(1))
	k := key(7)
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(i + 1)
	}
	plan, err := m.Store([]tier.Key{k}, [][]byte{src})
	if err != nil || len(plan.Keys) != 1 {
		t.Fatal(plan, err)
	}
	plan.Keys[0] = key(8) // the caller's slice, reused at once
	for done := []tier.Done(nil); len(done) == 0; {
		done, _ = m.Drain(nil)
		if len(done) > 0 && !done[0].OK {
			t.Fatal(done[0].Err)
		}
	}
	dst := make([]byte, 64)
	if _, err := m.Load([]tier.Key{k}, [][]byte{dst}); err != nil {
		t.Fatal(err)
	}
	for done := []tier.Done(nil); len(done) == 0; {
		done, _ = m.Drain(nil)
		if len(done) > 0 && !done[0].OK {
			t.Fatalf("the block stored under its key does not load: %v", done[0].Err)
		}
	}
	if string(dst) != string(src) {
		t.Fatal("a load served other bytes")
	}
}
