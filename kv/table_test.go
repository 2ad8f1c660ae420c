package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

func TestTableAppend(t *testing.T) {
	for _, c := range []struct {
		name       string
		appends    []int
		wantBlocks []int
	}{
		{"empty append", []int{0}, []int{0}},
		{"one token", []int{1}, []int{1}},
		{"fill a block", []int{16}, []int{1}},
		{"one past a block", []int{16, 1}, []int{1, 2}},
		{"token by token", []int{1, 1, 14, 1}, []int{1, 1, 1, 2}},
		{"large", []int{100}, []int{7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(t, 16, 32)
			tbl, err := kv.NewTable(16)
			require.NoError(t, err)
			tokens := 0
			for i, n := range c.appends {
				require.NoError(t, tbl.Append(p, n))
				tokens += n
				require.Equal(t, tokens, tbl.Tokens())
				require.Len(t, tbl.Handles(), c.wantBlocks[i])
				require.Equal(t, c.wantBlocks[i], p.Stats().Live)
			}
			require.NoError(t, tbl.Release(p))
			require.Zero(t, tbl.Tokens())
			require.Empty(t, tbl.Handles())
			require.Zero(t, p.Stats().Live)
		})
	}
}

func TestTableAllOrNothing(t *testing.T) {
	p := newPool(t, 4, 32)
	tbl, _ := kv.NewTable(2)
	require.NoError(t, tbl.Append(p, 3)) // 2 blocks
	err := tbl.Append(p, 6)              // needs 3 more, 2 free
	require.ErrorIs(t, err, pool.ErrExhausted)
	require.Equal(t, 3, tbl.Tokens())
	require.Len(t, tbl.Handles(), 2)
	require.Equal(t, 2, p.Stats().Live, "a failed append allocates nothing")
	require.NoError(t, tbl.Append(p, 5)) // exactly 4 blocks
	require.Len(t, tbl.Handles(), 4)
}

func TestTableReleaseThroughSender(t *testing.T) {
	p := newPool(t, 8, 32)
	tbl, _ := kv.NewTable(4)
	require.NoError(t, tbl.Append(p, 17))
	s, err := p.NewSender()
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- tbl.Release(s) }() // a worker releases the request
	require.NoError(t, <-done)
	n, err := p.Drain()
	require.NoError(t, err)
	require.Equal(t, 5, n)
	st := p.Stats()
	require.Equal(t, uint64(5), st.RemoteSubmitted)
	require.Equal(t, uint64(5), st.RemoteDrained)
	require.Zero(t, st.Live)
}

func TestTableRejectsBadArguments(t *testing.T) {
	_, err := kv.NewTable(0)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	p := newPool(t, 4, 32)
	tbl, _ := kv.NewTable(1)
	require.ErrorIs(t, tbl.Append(p, -1), pool.ErrInvalidArgument)
	require.NoError(t, tbl.Append(p, 1))
	require.ErrorIs(t, tbl.Append(p, int(^uint(0)>>1)), pool.ErrInvalidArgument)
	require.Equal(t, 1, tbl.Tokens())
	require.Equal(t, 1, tbl.TokensPerBlock())
}

func TestTableHotPathAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need warm runs")
	}
	p := newPool(t, 64, 32)
	tbl, err := kv.NewTable(16)
	require.NoError(t, err)
	s, err := p.NewSender()
	require.NoError(t, err)
	op := func() {
		if err := tbl.Append(p, 40); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Release(s); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Drain(); err != nil {
			t.Fatal(err)
		}
	}
	op()
	if a := testing.AllocsPerRun(100, op); a != 0 {
		t.Fatalf("table append+release+drain: %v allocs, want 0", a)
	}
}
