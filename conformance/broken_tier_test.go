package conformance_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// Broken storages under a correct Manager.

// lostStorage acknowledges writes it never makes.
type lostStorage struct{ *host.Tier }

func (lostStorage) WriteSlot(int, tier.Key, uint64, []byte) error { return nil }

// tornStorage serves a block with one byte changed, as a torn read would.
type tornStorage struct{ *host.Tier }

func (s tornStorage) ReadSlot(slot int, k tier.Key, gen uint64, dst []byte) error {
	err := s.Tier.ReadSlot(slot, k, gen, dst)
	dst[len(dst)/2] ^= 0x40
	return err
}

// Broken managers around a correct one.

// staleManager applies completions issued before a Reset.
type staleManager struct{ *tier.Manager }

func (m staleManager) CompleteStore(j tier.Job, ok bool) error {
	if err := m.Manager.CompleteStore(j, ok); !errors.Is(err, tier.ErrStaleJob) {
		return err
	}
	return nil
}

func (m staleManager) CompleteLoad(j tier.Job) error {
	if err := m.Manager.CompleteLoad(j); !errors.Is(err, tier.ErrStaleJob) {
		return err
	}
	return nil
}

// driftManager reports one free slot too many once a block is stored.
type driftManager struct{ *tier.Manager }

func (m driftManager) Stats() tier.Stats {
	s := m.Manager.Stats()
	if s.Stores > 0 {
		s.Free++
	}
	return s
}

// unpinnedManager forgets pins at once: pinned blocks can be evicted.
type unpinnedManager struct{ *tier.Manager }

func (m unpinnedManager) PrepareLoad(keys []tier.Key) (tier.LoadPlan, error) {
	p, err := m.Manager.PrepareLoad(keys)
	if err == nil {
		_ = m.Manager.CompleteLoad(p.Job)
	}
	return p, err
}

func (m unpinnedManager) CompleteLoad(tier.Job) error { return nil }

func (m unpinnedManager) Stats() tier.Stats { return m.Manager.Stats() }

// silentRemover removes what it should but reports no busy key: a caller
// that retries the busy ones after Drain never learns which they are.
type silentRemover struct{ *tier.Manager }

func (m silentRemover) Remove(keys, busy []tier.Key) (int, []tier.Key, error) {
	n, _, err := m.Manager.Remove(keys, nil)
	return n, busy, err
}

func brokenHost(wrap func(*host.Tier) tier.Storage) (*tier.Manager, error) {
	st, err := host.New(512, 16, host.WithHeap())
	if err != nil {
		return nil, err
	}
	return tier.New(wrap(st), tier.WithWorkers(2))
}

// TestBrokenTiers: every broken tier is caught, by the cases expected, with
// the kind of violation expected.
func TestBrokenTiers(t *testing.T) {
	tests := []struct {
		name  string
		check func() error
		cases []string
		kind  error
	}{
		{"lost store", func() error {
			return conformance.CheckTier(func() (*tier.Manager, error) {
				return brokenHost(func(h *host.Tier) tier.Storage { return lostStorage{h} })
			})
		}, []string{"RoundTrip", "Pins", "Remove"}, conformance.ErrLost},
		{"torn read served", func() error {
			return conformance.CheckTier(func() (*tier.Manager, error) {
				return brokenHost(func(h *host.Tier) tier.Storage { return tornStorage{h} })
			})
		}, []string{"RoundTrip", "Pins", "Remove"}, conformance.ErrCorrupted},
		{"stale generation accepted", func() error {
			return conformance.CheckTier(func() (staleManager, error) {
				m, err := brokenHost(func(h *host.Tier) tier.Storage { return h })
				return staleManager{m}, err
			})
		}, []string{"Jobs"}, conformance.ErrContract},
		{"accounting drift", func() error {
			return conformance.CheckTier(func() (driftManager, error) {
				m, err := brokenHost(func(h *host.Tier) tier.Storage { return h })
				return driftManager{m}, err
			})
		}, []string{"RoundTrip", "Accounting", "Pins", "Jobs", "Remove"}, conformance.ErrAccounting},
		{"pinned block evicted", func() error {
			return conformance.CheckTier(func() (unpinnedManager, error) {
				m, err := brokenHost(func(h *host.Tier) tier.Storage { return h })
				return unpinnedManager{m}, err
			})
		}, []string{"Accounting", "Pins", "Jobs", "Remove"}, nil},
		{"remove reports no busy block", func() error {
			return conformance.CheckTier(func() (silentRemover, error) {
				m, err := brokenHost(func(h *host.Tier) tier.Storage { return h })
				return silentRemover{m}, err
			})
		}, []string{"Remove"}, conformance.ErrContract},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check()
			if err == nil {
				t.Fatal("not caught")
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("caught, but not as %v: %v", tc.kind, err)
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var v *conformance.Violation
				if !errors.As(e, &v) {
					t.Fatalf("%v is not a *conformance.Violation", e)
				}
				got = append(got, v.Case)
			}
			if strings.Join(got, ",") != strings.Join(tc.cases, ",") {
				t.Errorf("caught by %v, want exactly %v:\n%v", got, tc.cases, err)
			}
		})
	}
}
