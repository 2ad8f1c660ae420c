package pool_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/shared"
)

// forEachTransport runs f over a heap pool of n blocks on every transport.
func forEachTransport(t *testing.T, n int, f func(t *testing.T, p *pool.Pool[*heap.Backing, pool.Transport, lifo.Policy])) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			b, err := heap.New(16, n)
			require.NoError(t, err)
			tr, err := tc.make()
			require.NoError(t, err)
			p, err := pool.New(b, tr, lifo.Policy{})
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			f(t, p)
		})
	}
}

// drainAll drains until a drain frees nothing and returns the total.
func drainAll[B pool.Backing, T pool.Transport, P pool.ReusePolicy](t *testing.T, p *pool.Pool[B, T, P]) int {
	t.Helper()
	total := 0
	for {
		n, err := p.Drain()
		require.NoError(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

func TestSenderClose(t *testing.T) {
	forEachTransport(t, 16, func(t *testing.T, p *pool.Pool[*heap.Backing, pool.Transport, lifo.Policy]) {
		hs, s := allocWithSender(t, p, 3)
		require.Equal(t, 1, pool.LiveSenders(p))
		n, err := s.TryFreeChunk(hs[:2])
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
		require.Zero(t, pool.LiveSenders(p), "the pool forgets a closed sender")

		require.ErrorIs(t, s.FreeChunk(hs[2:]), pool.ErrClosed)
		require.ErrorIs(t, s.Free(hs[2]), pool.ErrClosed)
		n, err = s.TryFreeChunk(hs[2:])
		require.Zero(t, n)
		require.ErrorIs(t, err, pool.ErrClosed)

		require.Equal(t, 2, drainAll(t, p), "what a sender freed before Close still comes back")
		st := p.Stats()
		require.Equal(t, uint64(2), st.RemoteSubmitted, "a retired sender's count is kept")
		require.Equal(t, uint64(2), st.RemoteDrained)
		require.Equal(t, 1, st.Live)
	})
}

// A sender per request, each closed when its request is done: the pool and
// its transport keep nothing of them, and the counts stay exact.
func TestSenderPerRequest(t *testing.T) {
	const requests = 5000
	forEachTransport(t, 64, func(t *testing.T, p *pool.Pool[*heap.Backing, pool.Transport, lifo.Policy]) {
		hs := make([]pool.Handle, 4)
		for range requests {
			require.NoError(t, p.AllocChunk(hs))
			s, err := p.NewSender()
			require.NoError(t, err)
			done := make(chan error)
			go func() {
				err := s.FreeChunk(hs)
				done <- errors.Join(err, s.Close())
			}()
			for waiting := true; waiting; {
				select {
				case err := <-done:
					require.NoError(t, err)
					waiting = false
				default:
					_, err := p.Drain() // a bounded transport may need room
					require.NoError(t, err)
				}
			}
			drainAll(t, p)
		}
		require.Zero(t, pool.LiveSenders(p))
		st := p.Stats()
		require.Equal(t, uint64(4*requests), st.RemoteSubmitted)
		require.Equal(t, uint64(4*requests), st.RemoteDrained)
		require.Zero(t, st.Live)
	})
}

// An allocation that finds the free list short drains until it has what it
// needs, even when a bounded transport hands over a small batch per drain.
func TestAllocDrainsUntilSatisfied(t *testing.T) {
	forEachTransport(t, 6, func(t *testing.T, p *pool.Pool[*heap.Backing, pool.Transport, lifo.Policy]) {
		all, s := allocWithSender(t, p, 6)
		// Send as much as the transport takes without waiting, in
		// one-handle chunks so that chunk queues fill per chunk.
		sent := 0
		for _, h := range all {
			n, err := s.TryFreeChunk([]pool.Handle{h})
			if errors.Is(err, pool.ErrFull) {
				break
			}
			require.NoError(t, err)
			sent += n
		}
		require.Positive(t, sent)
		dst := make([]pool.Handle, sent)
		require.NoError(t, p.AllocChunk(dst), "AllocChunk(%d) with %d freed remotely", sent, sent)
		require.Equal(t, 6, p.Stats().Live)
		require.ErrorIs(t, p.AllocChunk(dst[:1]), pool.ErrExhausted)
	})
}

// Snapshot is read by a scraper goroutine while the owner and workers run;
// every snapshot satisfies the Stats identities and counts never go back.
// Run it with -race.
func TestSnapshotWhileBusy(t *testing.T) {
	forEachTransport(t, 64, func(t *testing.T, p *pool.Pool[*heap.Backing, pool.Transport, lifo.Policy]) {
		stop := make(chan struct{})
		scraped := make(chan error, 1)
		took := make(chan struct{}) // closed at the scraper's first snapshot
		go func() {
			var last pool.Stats
			n := 0
			for {
				select {
				case <-stop: // only after the first snapshot: see took
					scraped <- nil
					return
				default:
				}
				st := p.Snapshot()
				if n++; n == 1 {
					close(took)
				}
				var sum uint64
				for _, c := range st.DrainSizes {
					sum += c
				}
				switch {
				case st.Live+st.Free != st.Capacity || st.Allocs-st.Frees != uint64(st.Live):
					scraped <- errors.New("snapshot breaks Live+Free = Capacity or Allocs-Frees = Live")
					return
				case st.RemoteDrained > st.RemoteSubmitted:
					scraped <- errors.New("snapshot drained more than submitted")
					return
				case sum != st.Drains:
					scraped <- errors.New("snapshot histogram does not sum to Drains")
					return
				case st.Allocs < last.Allocs || st.Frees < last.Frees || st.RemoteSubmitted < last.RemoteSubmitted || st.Drains < last.Drains:
					scraped <- errors.New("a counter went back")
					return
				}
				last = st
			}
		}()
		work := make(chan []pool.Handle, 16)
		var wg sync.WaitGroup
		for range 2 {
			s, err := p.NewSender()
			require.NoError(t, err)
			wg.Go(func() {
				for hs := range work {
					_ = s.FreeChunk(hs)
				}
			})
		}
		for range 2000 {
			hs := make([]pool.Handle, 4)
			if err := p.AllocChunk(hs); errors.Is(err, pool.ErrExhausted) {
				_, _ = p.Drain()
				continue
			}
			select {
			case work <- hs:
			default:
				require.NoError(t, p.FreeChunk(hs))
			}
			_, err := p.Drain()
			require.NoError(t, err)
		}
		close(work)
		idle := make(chan struct{})
		go func() { wg.Wait(); close(idle) }()
		for done := false; !done; {
			select {
			case <-idle:
				done = true
			default:
				_, _ = p.Drain() // workers on a bounded transport may wait for room
			}
		}
		drainAll(t, p)
		// On a loaded machine the scraper may not have run yet: the owner
		// keeps stepping until it has a snapshot, as a serving loop would.
		for waiting := true; waiting; {
			select {
			case <-took:
				waiting = false
			default:
				_, _ = p.Drain()
				runtime.Gosched()
			}
		}
		close(stop)
		require.NoError(t, <-scraped)
		p.Stats() // the owner publishes
		require.Zero(t, p.Snapshot().Live)
	})
}

// Rejected handles queued ahead of good ones do not make an allocation give
// up: it drains past them until the good ones arrive.
func TestAllocDrainsPastRejects(t *testing.T) {
	tr, err := shared.New(shared.WithCapacity(64), shared.WithBatch(1))
	require.NoError(t, err)
	b, err := heap.New(16, 2)
	require.NoError(t, err)
	p, err := pool.New(b, tr, lifo.Policy{})
	require.NoError(t, err)
	defer p.Close()
	hs, s := allocWithSender(t, p, 2)
	stale := mkHandle(poolID(hs[0]), 0, 0) // a forged, never-live generation
	require.NoError(t, s.FreeChunk([]pool.Handle{stale, stale, stale, stale, stale, hs[0], hs[1]}))
	require.NoError(t, p.AllocChunk(make([]pool.Handle, 2)), "five rejects ahead of two good frees, one handle per drain")
	st := p.Stats()
	require.Equal(t, uint64(5), st.Rejected)
	require.Equal(t, 2, st.Live)
}

// Senders counts the open senders: made and not yet closed.
func TestSendersCount(t *testing.T) {
	hb, err := heap.New(64, 4)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(hb, mustShared(t), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var ss []*pool.Sender
	for i := 1; i <= 3; i++ {
		s, _ := p.NewSender()
		ss = append(ss, s)
		if n := p.Senders(); n != i {
			t.Fatalf("%d senders made, Senders() = %d", i, n)
		}
	}
	_ = ss[1].Close()
	_ = ss[1].Close()
	if n := p.Senders(); n != 2 {
		t.Fatalf("after one Close (twice): %d", n)
	}
	_ = p.Close()
	if n := p.Senders(); n != 0 {
		t.Fatalf("after the pool's Close: %d", n)
	}
}

func mustShared(t *testing.T) *shared.Transport {
	t.Helper()
	tr, err := shared.New()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
