package kv

// EventKind tells the three kinds of cache events apart.
type EventKind uint8

// The events of vLLM's KV event stream, which routers use to learn what an
// engine caches.
const (
	// BlockStored: full blocks were added to the prefix cache.
	BlockStored EventKind = iota + 1
	// BlockRemoved: cached blocks were evicted or dropped.
	BlockRemoved
	// AllBlocksCleared: the prefix cache is empty after Reset.
	AllBlocksCleared
)

// String returns vLLM's name of the event.
func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "EventKind(?)"
}

// Event is one change of the prefix cache, passed to the subscriber set
// with WithSubscriber. Its fields map one to one onto vLLM's events:
//
//	BlockStored:  block_hashes = Hashes, parent_block_hash = Parent (null
//	              when zero), token_ids = Tokens, block_size = BlockSize,
//	              lora_name = Key.Adapter (null when empty)
//	BlockRemoved: block_hashes = Hashes
//
// A hash is exported as vLLM does, as its bytes (Hash.AppendBytes) or as
// a 64-bit integer (Hash.Uint64).
//
// The manager reuses the Event and its slices: a subscriber must copy what
// it keeps before it returns. It is called on the owner goroutine, inside
// the manager call that changed the cache, and must not call the manager.
// Without a subscriber the manager builds no events at all.
type Event struct {
	Kind EventKind
	// Hashes are the blocks stored or removed; stored blocks in chain
	// order, each the parent of the next.
	Hashes []Hash
	// Parent is the hash of the block before Hashes[0] (BlockStored),
	// zero when Hashes[0] is a sequence's first block.
	Parent Hash
	// Tokens are the token ids of the stored blocks, BlockSize per hash.
	Tokens []uint32
	// BlockSize is the number of tokens per block.
	BlockSize int
	// Key is the stored blocks' adapter and salt.
	Key Key
}
