package adapters

import (
	"github.com/locus-go/locus/internal/relay"
	"github.com/locus-go/locus/pool"
)

// Releaser releases handles from a goroutine other than the owner: a
// worker that finished a batch releases its adapters with one push each,
// and the owner applies the releases at its next Drain. Release only hands
// the handle over: it cannot validate it without synchronizing with the
// owner, so the owner validates each handle when it drains and rejects a
// stale, foreign or doubled one (Stats.RejectedReleases, and Drain's
// error) without touching any adapter.
//
// A Releaser belongs to one goroutine at a time; give each worker its own
// (their fields sit on cache lines of their own, so releasers on different
// cores never share one). A Release that returns nil happens before the
// Drain that applies it, so the owner sees every write the worker made
// before. Do not use the adapter's bytes after Release. The zero Releaser
// is not usable (its calls return pool.ErrClosed); make one with
// Manager.NewReleaser.
type Releaser struct {
	s relay.Sender[pool.Handle]
}

// NewReleaser returns a Releaser for one worker goroutine. Safe to call
// from any goroutine.
func (m *Manager) NewReleaser() (*Releaser, error) {
	if m == nil || m.rel == nil || m.closing.Load() {
		return nil, errClosed
	}
	p, err := m.rel.NewProducer()
	if err != nil {
		return nil, err
	}
	r := &Releaser{}
	r.s.Init(p, &m.closing)
	return r, nil
}

// Release hands h to the owner, one push that never waits. It fails with
// pool.ErrClosed once the releaser or its Manager is closed, and with
// ErrInvalidHandle for the zero Handle; other bad handles are rejected by
// the owner's Drain.
func (r *Releaser) Release(h Handle) error {
	if r == nil || r.s.Stopped() {
		return errClosed
	}
	if h.IsZero() {
		return ErrInvalidHandle
	}
	return r.s.Send(h.handle())
}

// Close retires the releaser: later calls fail with pool.ErrClosed, and
// what it released before still reaches the owner's next Drain. Close may
// be called more than once.
func (r *Releaser) Close() error {
	if r == nil {
		return nil
	}
	return r.s.Close()
}
