package kv

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/locus-go/locus/pool"
)

// HashAlgo selects the function that identifies full blocks.
type HashAlgo uint8

const (
	// SHA256CBOR, the default, hashes the canonical CBOR encoding of
	// (parent hash, token ids, extra keys) with SHA-256: vLLM's
	// "sha256_cbor". Collisions are practically impossible, so a cache hit
	// can never hand one tenant another tenant's KV.
	SHA256CBOR HashAlgo = iota + 1
	// XXH3CBOR hashes the same encoding with 128-bit XXH3: vLLM's
	// "xxhash_cbor". It is several times faster but not collision
	// resistant: someone who controls prompts can construct two prefixes
	// with one hash and read KV computed for another request. Choose it
	// only when every prompt comes from a trusted source.
	XXH3CBOR
)

// String returns vLLM's name of the algorithm.
func (a HashAlgo) String() string {
	switch a {
	case SHA256CBOR:
		return "sha256_cbor"
	case XXH3CBOR:
		return "xxhash_cbor"
	}
	return fmt.Sprintf("HashAlgo(%d)", uint8(a))
}

func (a HashAlgo) size() int {
	switch a {
	case SHA256CBOR:
		return sha256.Size
	case XXH3CBOR:
		return 16
	}
	return 0
}

// Hash identifies a full block by its tokens, its extra keys and, through
// its parent's hash, every token before it. Hashes are comparable; the zero
// Hash is the parent of a sequence's first block.
type Hash struct {
	sum [sha256.Size]byte
	n   uint8 // digest length: 32 (SHA256CBOR), 16 (XXH3CBOR), 0 for the zero Hash
}

// key is h's key in the prefix cache's index: the digest's first 8 bytes.
// Go's map hashes a uint64 key on its fastest path, where a whole Hash (33
// bytes) goes through the generic one, which cost a prefix hit about a
// fifth of its time. A lookup confirms the whole hash (Manager.cached).
func (h Hash) key() uint64 { return binary.LittleEndian.Uint64(h.sum[:8]) }

// IsZero reports whether h is the zero Hash.
func (h Hash) IsZero() bool { return h.n == 0 }

// Len returns the digest's length in bytes: 32, 16, or 0 for the zero Hash.
func (h Hash) Len() int { return int(h.n) }

// AppendBytes appends the digest to b: the bytes form of a block hash in
// vLLM's events, sent when VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES is 0 (vLLM's
// default is the integer form, Uint64).
func (h Hash) AppendBytes(b []byte) []byte { return append(b, h.sum[:h.n]...) }

// Uint64 returns the digest's low 64 bits as a big-endian integer: vLLM's
// integer form of a block hash (its default, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1), and
// what llm-d's event adapter reduces a byte hash to. It is 0 for the zero
// Hash.
func (h Hash) Uint64() uint64 {
	if h.n < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(h.sum[h.n-8 : h.n])
}

// String returns the digest in hex.
func (h Hash) String() string { return hex.EncodeToString(h.sum[:h.n]) }

// Key is what, besides its tokens, tells the KV of two blocks apart: the
// adapter that computed it and a tenant's cache salt. Requests share cached
// blocks only when their keys are equal. The zero Key is a request of the
// base model without a salt.
type Key struct {
	// Adapter names the LoRA adapter (vLLM's lora_name); it is hashed into
	// every block.
	Adapter string
	// Salt isolates a tenant's cache (vLLM's cache_salt); it is hashed into
	// the first block only, which through the chain makes every later hash
	// of the sequence distinct too.
	Salt string
}

// Hasher computes the chained block hashes a Manager uses, for code that
// must predict them without a manager: a router that hashes a prompt to
// find which engine caches it. Make one with NewHasher. A Hasher is not
// safe for concurrent use (it reuses an encoding buffer); make one per
// goroutine.
//
// A block's hash is the hash of the canonical CBOR encoding of the
// three-element array [parent, token ids, extra keys], exactly as vLLM's
// hash_block_tokens with "sha256_cbor" or "xxhash_cbor" builds it: parent is
// the parent block's digest as a byte string (for the first block, the root
// hash), token ids are unsigned integers, and extra keys are null or an
// array of text strings, the adapter name then, in the first block only,
// the salt. The root hash is the hash of the seed as a CBOR text string:
// vLLM's NONE_HASH when PYTHONHASHSEED is set to the seed. Nothing depends
// on the process, so every machine computes the same hashes.
type Hasher struct {
	algo HashAlgo
	root Hash
	buf  []byte
}

// NewHasher returns a Hasher for algo whose chains start at the root hash
// of seed. It fails with an error wrapping pool.ErrInvalidConfig for an
// unknown algorithm.
func NewHasher(algo HashAlgo, seed string) (*Hasher, error) {
	if algo.size() == 0 {
		return nil, fmt.Errorf("kv: %w: hash algorithm %v", pool.ErrInvalidConfig, algo)
	}
	h := &Hasher{algo: algo}
	h.buf = appendText(h.buf[:0], seed)
	h.root = h.digest(h.buf)
	return h, nil
}

// Algo returns the hasher's algorithm.
func (h *Hasher) Algo() HashAlgo {
	if h == nil {
		return 0
	}
	return h.algo
}

// Root returns the hash that stands in for the parent of a first block.
func (h *Hasher) Root() Hash {
	if h == nil {
		return Hash{}
	}
	return h.root
}

// Block returns the hash of a full block of tokens whose parent block has
// hash parent; the zero parent marks a sequence's first block, which
// chains from the root and carries key's salt. A nil or zero Hasher returns
// the zero Hash.
func (h *Hasher) Block(parent Hash, tokens []uint32, key Key) Hash {
	if h == nil || h.root.IsZero() {
		return Hash{}
	}
	first := parent.IsZero()
	if first {
		parent = h.root
	}
	b := append(h.buf[:0], 0x83) // an array of three
	b = appendHead(b, majorBytes, uint64(parent.n))
	b = append(b, parent.sum[:parent.n]...)
	b = appendHead(b, majorArray, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendHead(b, majorUint, uint64(t))
	}
	extras := 0
	if key.Adapter != "" {
		extras++
	}
	if first && key.Salt != "" {
		extras++
	}
	if extras == 0 {
		b = append(b, 0xf6) // null
	} else {
		b = appendHead(b, majorArray, uint64(extras))
		if key.Adapter != "" {
			b = appendText(b, key.Adapter)
		}
		if first && key.Salt != "" {
			b = appendText(b, key.Salt)
		}
	}
	h.buf = b
	return h.digest(b)
}

// AppendHashes appends to dst the hashes of every full block of tokens,
// blockSize tokens to a block, from the sequence's first block on: the
// keys a router looks up for a prompt. A partial last block has no hash.
func (h *Hasher) AppendHashes(dst []Hash, tokens []uint32, blockSize int, key Key) []Hash {
	if blockSize <= 0 || h == nil || h.root.IsZero() {
		return dst
	}
	var parent Hash
	for len(tokens) >= blockSize {
		parent = h.Block(parent, tokens[:blockSize], key)
		dst = append(dst, parent)
		tokens = tokens[blockSize:]
	}
	return dst
}

func (h *Hasher) digest(b []byte) Hash {
	var out Hash
	switch h.algo {
	case XXH3CBOR:
		sum := xxh3.Hash128(b).Bytes() // big-endian, as xxhash's xxh3_128_digest
		copy(out.sum[:], sum[:])
		out.n = 16
	default:
		out.sum = sha256.Sum256(b)
		out.n = sha256.Size
	}
	return out
}

// CBOR major types (RFC 8949 §3.1) of the encoding above.
const (
	majorUint  = 0 << 5
	majorBytes = 2 << 5
	majorText  = 3 << 5
	majorArray = 4 << 5
)

// appendHead appends a CBOR head in its shortest form, which is what
// canonical (deterministic) encoding requires.
func appendHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= 0xff:
		return append(b, major|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, major|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, major|27), n)
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majorText, uint64(len(s))), s...)
}
