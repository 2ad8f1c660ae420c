package kv_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
)

// A scraper reading the pool's Snapshot is served while the owner drives
// only the manager: the manager's Drain drains the pool, which publishes
// what the scraper asked for.
func TestDrainPublishesThePool(t *testing.T) {
	p := newPool(t, 16, 64)
	m, err := kv.New(p)
	require.NoError(t, err)
	_, _, err = m.Admit(span(0, 40), kv.Key{}) // 3 blocks
	require.NoError(t, err)
	live := make(chan int)
	go func() { live <- p.Snapshot().Live }()
	for {
		_, err = m.Drain()
		require.NoError(t, err)
		select {
		case n := <-live:
			require.Equal(t, 3, n)
			return
		case <-time.After(time.Millisecond):
		}
	}
}
