package conformance_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
)

func newHostTier(t *testing.T) *tier.Manager {
	st, err := host.New(512, 32, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	m, err := tier.New(st, tier.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTierHost(t *testing.T) {
	conformance.TestTier(t, newHostTier)
}

func TestTierHostMapped(t *testing.T) {
	conformance.TestTier(t, func(t *testing.T) *tier.Manager {
		st, err := host.New(4096, 16, host.WithPrefault())
		if err != nil {
			t.Fatal(err)
		}
		m, err := tier.New(st, tier.WithEviction(tier.NewS3FIFO))
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

func TestTierDisk(t *testing.T) {
	conformance.TestTier(t, func(t *testing.T) *tier.Manager {
		st, err := disk.Open(filepath.Join(t.TempDir(), "tier"), 1000, 24)
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

func ExampleCheckTier() {
	err := conformance.CheckTier(func() (*tier.Manager, error) {
		st, err := host.New(256, 16)
		if err != nil {
			return nil, err
		}
		return tier.New(st)
	})
	fmt.Println(err)
	// Output: <nil>
}
