package pages_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

func TestNilPool(t *testing.T) {
	var p *pages.Pool
	_, err := p.Alloc(1, pages.DefaultContent)
	require.ErrorIs(t, err, pool.ErrClosed)
	for _, err := range []error{p.Free(pages.Run{}), p.Pin(pages.Run{}), p.Unpin(pages.Run{}), p.Close()} {
		require.ErrorIs(t, err, pool.ErrClosed)
	}
	_, err = p.Pins(pages.Run{})
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = p.Evict(1)
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = p.Bytes(pages.Run{})
	require.ErrorIs(t, err, pool.ErrClosed)
	_, _, err = p.Span(pages.Run{})
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = p.Content(pages.Run{})
	require.ErrorIs(t, err, pool.ErrClosed)
	require.Nil(t, p.ContentTypes())
	require.Zero(t, p.PageSize()+p.Pages())
	require.Equal(t, pages.Stats{}, p.Stats())
	require.Equal(t, pages.Stats{}, p.Snapshot())
}
