package kv

import (
	"fmt"
	"math/bits"

	"github.com/locus-go/locus/pool"
)

// Shape is what sizes a KV block: the model's attention shape, the
// element size of its KV cache and the tokens per block. A block holds,
// for each of TokensPerBlock tokens, a key and a value vector of HeadDim
// elements per KV head in every layer.
type Shape struct {
	Layers         int // layers with attention (their KV is cached)
	KVHeads        int // key-value heads per layer (fewer than query heads under GQA)
	HeadDim        int // elements per head
	DTypeBytes     int // bytes per element: 2 for bf16 and fp16, 1 for fp8
	TokensPerBlock int // as the manager's WithTokensPerBlock
}

// BlockBytes returns the bytes of one KV block of shape s:
//
//	2 (K and V) × Layers × KVHeads × HeadDim × DTypeBytes × TokensPerBlock
//
// Llama-3-70B (80 layers, 8 KV heads, head dim 128, bf16) takes 5 MiB per
// 16-token block. Use it to size a pool's blocks when one block holds a
// token range of every layer, as vLLM's paged layout does; a pool of one
// layer's blocks per layer needs BlockBytes of a one-layer shape. It does
// not cover layouts that store one latent vector instead of K and V
// (multi-head latent attention) or quantization scales. A field that is
// not positive, or a product that overflows int, fails with
// pool.ErrInvalidArgument.
func BlockBytes(s Shape) (int, error) {
	n := uint64(2)
	for _, f := range [...]int{s.Layers, s.KVHeads, s.HeadDim, s.DTypeBytes, s.TokensPerBlock} {
		if f <= 0 {
			return 0, fmt.Errorf("kv: %w: shape %+v", pool.ErrInvalidArgument, s)
		}
		hi, lo := bits.Mul64(n, uint64(f))
		if hi != 0 || lo > uint64(maxInt) {
			return 0, fmt.Errorf("kv: %w: a block of shape %+v overflows int", pool.ErrInvalidArgument, s)
		}
		n = lo
	}
	return int(n), nil
}

// BlocksIn returns how many blocks of shape s fit in budget bytes (the
// memory left for the KV cache after the weights and activations), and the
// bytes of one. Pass the count to a pool's block count option and the size
// to its block size. It fails as BlockBytes does, and with
// pool.ErrInvalidArgument for a negative budget.
func BlocksIn(budget int64, s Shape) (blocks, blockBytes int, err error) {
	size, err := BlockBytes(s)
	if err != nil {
		return 0, 0, err
	}
	if budget < 0 {
		return 0, 0, fmt.Errorf("kv: %w: budget of %d bytes", pool.ErrInvalidArgument, budget)
	}
	return int(min(uint64(budget)/uint64(size), uint64(maxInt))), size, nil
}
