package kv_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

func TestRemoteRelease(t *testing.T) { testRemoteRelease(t, newPool(t, 64, 64)) }

// testRemoteRelease: workers release sequences that share blocks with one
// push each, two of them release the same sequence, one releases a stale
// id; the owner drains while they run. Every reference is dropped exactly
// once: the sequence released twice drops its references once, and the
// blocks it shares with a live sequence stay held.
func testRemoteRelease(t *testing.T, p kv.BlockPool) {
	m, err := kv.New(p, kv.WithTokensPerBlock(16))
	require.NoError(t, err)
	defer m.Close()
	system := span(0, 64)
	keep, _ := admit(t, m, system, kv.Key{}) // holds the system prompt's blocks
	const workers, perWorker = 4, 8
	ids := make([][]kv.SeqID, workers)
	for w := range ids {
		for i := range perWorker {
			id, _ := admit(t, m, cat(system, span(1000*(w+1)+16*i, 1000*(w+1)+16*i+5)), kv.Key{})
			ids[w] = append(ids[w], id)
		}
	}
	twice := ids[0][0]
	stale, _ := admit(t, m, span(5000, 5010), kv.Key{})
	release(t, m, stale)
	before := m.Stats()

	var wg sync.WaitGroup
	for w := range workers {
		r, err := m.NewReleaser()
		require.NoError(t, err)
		wg.Go(func() {
			defer r.Close()
			for _, id := range ids[w] {
				require.NoError(t, r.Release(id))
			}
			if w == 1 {
				require.NoError(t, r.Release(twice)) // a second worker releases it too
				require.NoError(t, r.Release(stale))
			}
		})
	}
	released, rejected, reported := 0, 0, 0
	drain := func() {
		d, err := m.Drain()
		released += d.Released
		reported += d.Rejected
		if err != nil {
			require.ErrorIs(t, err, kv.ErrStaleSequence)
			require.ErrorIs(t, err, kv.ErrInvalidSequence)
		}
		require.NoError(t, m.Check())
	}
	for released < workers*perWorker {
		drain()
	}
	wg.Wait()
	drain()
	st := m.Stats()
	rejected = int(st.RejectedReleases - before.RejectedReleases)
	require.Equal(t, workers*perWorker, released)
	require.Equal(t, 2, rejected)
	require.Equal(t, 2, reported, "Drain reports each rejected release")
	require.Equal(t, uint64(workers*perWorker), st.RemoteReleases)
	require.Equal(t, 1, st.Sequences)
	require.Equal(t, 4, st.InUse, "the live sequence still holds the system prompt")
	_, err = m.Tokens(keep)
	require.NoError(t, err)
	release(t, m, keep)
	require.Zero(t, m.Stats().InUse)

	r, err := m.NewReleaser()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.ErrorIs(t, r.Release(keep), pool.ErrClosed)
	require.NoError(t, m.Close())
	_, err = m.NewReleaser()
	require.ErrorIs(t, err, pool.ErrClosed)
}
