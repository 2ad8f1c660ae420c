package tier_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locus-go/locus/tier"
)

// A scraper reads Snapshot in a loop while the owner stores, loads, evicts
// and drains: every snapshot satisfies the accounting identity, counts
// never go backwards, the scraper is served (not only by its 100 ms
// timeout), and after Close it gets the final counts at once. Run it with
// -race.
func TestSnapshotRacesOwner(t *testing.T) {
	const slots = 16
	m := newManager(t, slots)
	first := m.Snapshot() // before any publication: the counts of New
	if first.Capacity != slots || first.Free != slots || first.Medium != tier.MediumCPU {
		t.Fatalf("first snapshot %+v", first)
	}

	var stop atomic.Bool
	var reads atomic.Int64
	var scraper sync.WaitGroup
	errs := make(chan string, 1)
	fail := func(msg string) {
		select {
		case errs <- msg:
		default:
		}
	}
	scraper.Go(func() {
		var last tier.Stats
		for !stop.Load() {
			s := m.Snapshot()
			reads.Add(1)
			if s.Free+s.Evictable+s.StorePending+s.LoadPinned != s.Capacity || s.Capacity != slots {
				fail("snapshot breaks the identity")
				return
			}
			if s.Stores < last.Stores || s.Lookups < last.Lookups || s.Evictions < last.Evictions || s.Loads < last.Loads {
				fail("snapshot went backwards")
				return
			}
			last = s
		}
	})

	dst := make([]byte, bs)
	var done []tier.Done
	deadline := time.Now().Add(300 * time.Millisecond)
	for i := 0; time.Now().Before(deadline) || reads.Load() < 5; i++ {
		k := key(i)
		_ = m.Lookup([]tier.Key{k}, nil)
		if _, err := m.Store([]tier.Key{k}, [][]byte{block(k)}); err != nil && err != tier.ErrNoSpace && err != tier.ErrBusy {
			t.Fatal(err)
		}
		if i > 0 {
			if prev := key(i - 1); m.Peek([]tier.Key{prev}, nil)[0] == tier.Hit {
				if _, err := m.Load([]tier.Key{prev}, [][]byte{dst}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var err error
		done, err = m.Drain(done[:0])
		if err != nil {
			t.Fatal(err)
		}
		// Wait for the copies, so that dst is free again for the next Load.
		for m.Stats().JobsInFlight > 0 {
			done, _ = m.Drain(done[:0])
			time.Sleep(10 * time.Microsecond)
		}
	}
	stop.Store(true)
	scraper.Wait()
	select {
	case msg := <-errs:
		t.Fatal(msg)
	default:
	}

	owner := m.Stats()
	if owner.Stores == 0 || owner.Loads == 0 || owner.Evictions == 0 {
		t.Fatalf("the owner did too little: %+v", owner)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	final := m.Snapshot()
	if time.Since(start) > 50*time.Millisecond {
		t.Fatalf("Snapshot after Close waited %v", time.Since(start))
	}
	if final.Stores != owner.Stores || final.Loads != owner.Loads || final.Lookups != owner.Lookups {
		t.Fatalf("final snapshot %+v, owner's last stats %+v", final, owner)
	}
}

// Snapshot of a nil or zero Manager returns the zero Stats at once.
func TestSnapshotNilZero(t *testing.T) {
	var nilM *tier.Manager
	var zero tier.Manager
	for _, m := range []*tier.Manager{nilM, &zero} {
		start := time.Now()
		if s := m.Snapshot(); s != (tier.Stats{}) {
			t.Fatalf("Snapshot = %+v", s)
		}
		if time.Since(start) > 50*time.Millisecond {
			t.Fatal("Snapshot of a nil or zero Manager waited")
		}
		m.Stats()
		_ = m.Close()
	}
}
