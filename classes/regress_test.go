package classes_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

// A sender refuses everything once its allocator is closed, even calls that
// would reach no class's pool, and Stats stay as they stood at Close.
func TestSenderAfterAllocatorClose(t *testing.T) {
	c, err := classes.Default([]classes.Class{{Size: 64, Blocks: 4}, {Size: 256, Blocks: 2}})
	require.NoError(t, err)
	s, err := c.NewSender()
	require.NoError(t, err)
	h, err := c.Alloc(10)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	before := c.Stats()
	enc := must(h.MarshalBinary())
	binary.LittleEndian.PutUint32(enc[pool.HandleSize:], 7) // a class the allocator does not have
	var unknown classes.Handle
	require.NoError(t, unknown.UnmarshalBinary(enc))
	require.ErrorIs(t, s.FreeChunk(nil), pool.ErrClosed)
	require.ErrorIs(t, s.FreeChunk([]classes.Handle{h}), pool.ErrClosed)
	require.ErrorIs(t, s.FreeChunk([]classes.Handle{unknown}), pool.ErrClosed)
	require.ErrorIs(t, s.Free(h), pool.ErrClosed)
	require.Equal(t, before, c.Stats())
	require.Equal(t, []classes.Class{{Size: 64, Blocks: 4}, {Size: 256, Blocks: 2}}, c.Classes(), "Classes reports the configuration after Close too")
}

func TestNilPoolAndSender(t *testing.T) {
	var c *classes.DefaultPool
	_, err := c.Alloc(1)
	require.ErrorIs(t, err, pool.ErrClosed)
	_, _, err = c.AllocBytes(1)
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = c.AllocClass(0, 1)
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorIs(t, c.Free(classes.Handle{}), pool.ErrClosed)
	require.ErrorIs(t, c.FreeChunk(nil), pool.ErrClosed)
	_, err = c.Bytes(classes.Handle{})
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = c.Drain()
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = c.NewSender()
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = c.ClassOf(1)
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = c.Class(0)
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorIs(t, c.Close(), pool.ErrClosed)
	require.Zero(t, len(c.Classes())+len(c.Stats().Classes)+len(c.Snapshot().Classes))

	var s *classes.Sender
	require.ErrorIs(t, s.FreeChunk(nil), pool.ErrClosed)
	require.ErrorIs(t, s.Free(classes.Handle{}), pool.ErrClosed)
	require.NoError(t, s.Close())
	require.Zero(t, s.Submitted())
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
