package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
)

// A scraper reading the pool's Snapshot sees the blocks a manager holds once
// the owner has called the manager's Drain, without draining the pool itself.
func TestDrainPublishesThePool(t *testing.T) {
	p := newPool(t, 16, 64)
	m, err := kv.New(p)
	require.NoError(t, err)
	_, _, err = m.Admit(span(0, 40), kv.Key{}) // 3 blocks
	require.NoError(t, err)
	require.Zero(t, p.Snapshot().Live, "nothing published yet")
	_, err = m.Drain()
	require.NoError(t, err)
	require.Equal(t, 3, p.Snapshot().Live)
}
