package redis

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/locus-go/locus/pool"
)

// Scope is what a namespace must tell apart: everything that changes a
// block's bytes, or what its hash means, for the same token ids. Two
// engines share blocks only when their Scopes are equal.
//
// LoRA adapters and cache salts need no field: kv hashes the adapter name
// into every block hash and the salt into the first (vLLM's extra keys), so
// the blocks of different adapters or tenants never share a key. Put the
// adapter in Extra only if your engine's block hashes leave it out.
type Scope struct {
	// Model names the model (required), e.g.
	// "meta-llama/Llama-3.1-8B-Instruct"; Revision its weights' revision.
	Model, Revision string
	// KVDType is the KV cache's element type ("bf16", "fp8_e4m3");
	// Layout the engine's block layout ("NHD", "HND", "mla").
	KVDType, Layout string
	// BlockTokens is the tokens per block.
	BlockTokens int
	// TPRank of TPSize and PPRank of PPSize: the shard of the KV this
	// engine holds (0 of 1 when not sharded).
	TPRank, TPSize, PPRank, PPSize int
	// HashAlgo and HashSeed: how block hashes are computed ("sha256_cbor"
	// and the seed given to kv.NewHasher).
	HashAlgo, HashSeed string
	// Extra is anything else that changes a block's bytes.
	Extra []string
}

// Namespace returns the namespace of s for Dial and New:
//
//	locus:<model>:<16 hex digits>
//
// where the model is s.Model with every character outside [A-Za-z0-9._/-]
// replaced by '_' (for an operator's SCAN by model) and the digits are the
// start of a SHA-256 over every field of s, so that Scopes that differ in
// any field give different namespaces and no field (a hash seed) can be
// read back from a key. It fails with an error wrapping
// pool.ErrInvalidConfig for an empty Model or negative numbers.
//
// Use it unless your fleet already has a naming scheme; every engine of a
// fleet must build its namespace the same way.
func (s Scope) Namespace() (string, error) {
	switch {
	case s.Model == "":
		return "", fmt.Errorf("%w: redis: scope without a model", pool.ErrInvalidConfig)
	case s.BlockTokens < 0 || s.TPRank < 0 || s.TPSize < 0 || s.PPRank < 0 || s.PPSize < 0:
		return "", fmt.Errorf("%w: redis: scope with a negative number: %+v", pool.ErrInvalidConfig, s)
	}
	h := sha256.New()
	field := func(v string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	field("locus-redis-scope-v1")
	for _, v := range []string{s.Model, s.Revision, s.KVDType, s.Layout, strconv.Itoa(s.BlockTokens),
		strconv.Itoa(s.TPRank), strconv.Itoa(s.TPSize), strconv.Itoa(s.PPRank), strconv.Itoa(s.PPSize),
		s.HashAlgo, s.HashSeed, strconv.Itoa(len(s.Extra))} {
		field(v)
	}
	for _, v := range s.Extra {
		field(v)
	}
	model := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '/', r == '-':
			return r
		}
		return '_'
	}, s.Model)
	return "locus:" + model + ":" + hex.EncodeToString(h.Sum(nil)[:8]), nil
}
