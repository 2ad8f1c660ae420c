package fleet

import (
	"fmt"
	"sync"

	"github.com/locus-go/locus/kv"
)

// Hasher computes a request's block hashes exactly as the engines'
// kv.Managers do (kv.Hasher.AppendHashes with their algorithm, seed and
// tokens per block), for the router, on any number of goroutines at once:
// kv.Hasher itself is for one goroutine, so Hasher keeps a pool of them.
type Hasher struct {
	algo kv.HashAlgo
	seed string
	bs   int
	pool sync.Pool // *kv.Hasher
}

// NewHasher returns a Hasher for engines configured with
// kv.WithHash(algo, seed) and kv.WithTokensPerBlock(tokensPerBlock) (algo
// 0 is kv's default, SHA256CBOR). It fails with ErrInvalidConfig for
// tokensPerBlock below 1, and with kv's error for an unknown algorithm.
func NewHasher(algo kv.HashAlgo, seed string, tokensPerBlock int) (*Hasher, error) {
	if algo == 0 {
		algo = kv.SHA256CBOR
	}
	if tokensPerBlock < 1 {
		return nil, fmt.Errorf("%w: %d tokens per block", ErrInvalidConfig, tokensPerBlock)
	}
	first, err := kv.NewHasher(algo, seed)
	if err != nil {
		return nil, err
	}
	h := &Hasher{algo: algo, seed: seed, bs: tokensPerBlock}
	h.pool.Put(first)
	return h, nil
}

// Append appends to dst the hashes of every full block of tokens, from the
// first, for a request of key, and returns dst: the hashes to Score or
// Pick. A partial last block has none. A nil or zero Hasher appends
// nothing.
func (h *Hasher) Append(dst []kv.Hash, tokens []uint32, key kv.Key) []kv.Hash {
	if h == nil || h.bs < 1 {
		return dst
	}
	kh, _ := h.pool.Get().(*kv.Hasher)
	if kh == nil {
		kh, _ = kv.NewHasher(h.algo, h.seed) // checked by NewHasher
	}
	dst = kh.AppendHashes(dst, tokens, h.bs, key)
	h.pool.Put(kh)
	return dst
}
