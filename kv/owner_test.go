package kv_test

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// hugePool claims a capacity whose manager could not fit in memory.
type hugePool struct{ kv.BlockPool }

func (hugePool) Capacity() int { return pool.MaxBlocks }

// A manager needs a fresh pool of its own and metadata that fits: a pool
// with blocks allocated, a pool another open manager owns and a capacity
// past memory are refused with ErrInvalidConfig; Close hands the pool back.
func TestNewRefusesSharedOrUsedPools(t *testing.T) {
	p := newPool(t, 8, 64)
	h, err := p.Alloc()
	require.NoError(t, err)
	if _, err := kv.New(p); !errors.Is(err, pool.ErrInvalidConfig) || !strings.Contains(err.Error(), "allocated") {
		t.Fatalf("a pool with a block allocated: %v", err)
	}
	require.NoError(t, p.Free(h))
	m, err := kv.New(p)
	require.NoError(t, err)
	if _, err := kv.New(p); !errors.Is(err, pool.ErrInvalidConfig) || !strings.Contains(err.Error(), "another open manager") {
		t.Fatalf("a second manager over one pool: %v", err)
	}
	require.NoError(t, m.Close())
	m2, err := kv.New(p)
	require.NoError(t, err, "the pool of a closed manager")
	require.NoError(t, m2.Close())
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30))
	if _, err := kv.New(hugePool{p}); !errors.Is(err, pool.ErrInvalidConfig) || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("a pool of 2^30 blocks: %v", err)
	}
}

// Absurd options are refused at construction, and a closed manager says it
// is the manager that is closed.
func TestNewRefusesAbsurdOptions(t *testing.T) {
	p := newPool(t, 8, 64)
	for _, n := range []int{0, -1, kv.MaxTokensPerBlock + 1, math.MaxInt} {
		if _, err := kv.New(p, kv.WithTokensPerBlock(n)); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("WithTokensPerBlock(%d): %v", n, err)
		}
	}
	m, err := kv.New(p)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	_, _, err = m.Admit([]uint32{1, 2, 3}, kv.Key{})
	if !errors.Is(err, pool.ErrClosed) || !strings.Contains(err.Error(), "manager closed") {
		t.Errorf("Admit after Close: %v", err)
	}
}

// liarPool hands out one block past its capacity (at the end of the
// chunk, after good ones), or with twice set the same block twice.
type liarPool struct {
	kv.BlockPool
	twice bool
}

func (l liarPool) AllocChunk(dst []pool.Handle) error {
	if err := l.BlockPool.AllocChunk(dst); err != nil {
		return err
	}
	last := len(dst) - 1
	if l.twice {
		dst[last] = dst[0]
		return nil
	}
	b, _ := dst[last].MarshalBinary()
	binary.LittleEndian.PutUint32(b[8:], 1000) // index 1000 of a pool of 8
	_ = dst[last].UnmarshalBinary(b)
	return nil
}

// A BlockPool that breaks its contract gets an error, not a panic.
func TestMisbehavingBlockPool(t *testing.T) {
	for _, twice := range []bool{false, true} {
		p := newPool(t, 8, 64)
		m, err := kv.New(liarPool{p, twice})
		require.NoError(t, err)
		_, _, err = m.Admit(make([]uint32, 40), kv.Key{})
		if !errors.Is(err, pool.ErrInvalidHandle) || !twice && !strings.Contains(err.Error(), "block 1000") {
			t.Fatalf("Admit over a pool that hands out a bad block (twice %v): %v", twice, err)
		}
		if st := m.Stats(); st.InUse != 0 || st.Free != 8 {
			t.Fatalf("after the refusal (twice %v): %+v", twice, st)
		}
		require.NoError(t, m.Check())
	}
}
