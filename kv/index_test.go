package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
)

// TestIndexKeyShared: the prefix cache's index is keyed by the first 8
// bytes of a block hash. A block whose hash shares only those bytes with a
// cached block's is no hit for it, is not cached while the other holds the
// key (it stays private and is freed at release, as a duplicate is), and
// is cached once the other is evicted.
func TestIndexKeyShared(t *testing.T) {
	for _, algo := range []kv.HashAlgo{kv.SHA256CBOR, kv.XXH3CBOR} {
		t.Run(algo.String(), func(t *testing.T) {
			m := newManager(t, 8, kv.WithHash(algo, "seed"))
			prompt := repeat(7, 16+1) // one full block and the last token's
			h := m.Hasher().Block(kv.Hash{}, prompt[:16], kv.Key{})
			// Another block, cached, whose hash is h's but for a byte
			// after the key.
			other := repeat(9, 16+1)
			id, _, err := m.Admit(other, kv.Key{})
			require.NoError(t, err)
			require.NoError(t, m.Release(id))
			twin := kv.FlipByte(h, 12)
			require.True(t, m.Rekey(m.Hasher().Block(kv.Hash{}, other[:16], kv.Key{}), twin))
			require.NoError(t, m.Check())

			n, err := m.Lookup(prompt, kv.Key{})
			require.NoError(t, err)
			require.Zero(t, n, "a hash sharing only its key with a cached block's is a hit")
			stored := m.Stats().Stored
			id, hit, err := m.Admit(prompt, kv.Key{})
			require.NoError(t, err)
			require.Zero(t, hit)
			require.Equal(t, stored, m.Stats().Stored, "a block whose key another block holds was cached")
			require.NoError(t, m.Check())
			require.NoError(t, m.Release(id))
			require.False(t, m.CachedHashes()[h])
			require.True(t, m.CachedHashes()[twin])

			// Once the twin is evicted, the block is cached as usual.
			require.True(t, m.Uncache(twin))
			id, hit, err = m.Admit(prompt, kv.Key{})
			require.NoError(t, err)
			require.Zero(t, hit)
			require.NoError(t, m.Release(id))
			require.True(t, m.CachedHashes()[h])
			n, err = m.Lookup(prompt, kv.Key{})
			require.NoError(t, err)
			require.Equal(t, 16, n)
			require.NoError(t, m.Check())
		})
	}
}
