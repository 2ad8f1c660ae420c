package tier

import (
	"encoding/hex"
	"strconv"
)

// KeyHashSize is the size of a Key's hash: a SHA-256 digest; shorter
// digests (XXH3-128) are zero-padded.
const KeyHashSize = 32

// Key names one offloaded block: the block's content hash (kv's chained
// block hash, as bytes) and a group index, as vLLM's OffloadKey is a block
// hash followed by a 4-byte KV-cache group index. Keys are comparable. The
// zero Key is valid but should not be used for a real block.
type Key struct {
	// Hash is the block hash, zero-padded to 32 bytes.
	Hash [KeyHashSize]byte
	// Group is the KV-cache group (0 for a model with one group).
	Group uint32
}

// KeyOf returns the key of a hash given as bytes (at most 32 of them; more
// are cut off) in group g.
func KeyOf(hash []byte, g uint32) Key {
	var k Key
	copy(k.Hash[:], hash)
	k.Group = g
	return k
}

// String returns the hash in hex and the group.
func (k Key) String() string {
	return hex.EncodeToString(k.Hash[:]) + "/" + strconv.FormatUint(uint64(k.Group), 10)
}

// Result is what Lookup says about one key.
type Result uint8

// The results of Lookup, vLLM's lookup results.
const (
	// Miss: the tier does not hold the block.
	Miss Result = iota
	// Hit: the block is loadable now (PrepareLoad or Load).
	Hit
	// HitPending: a store of the block is in flight; it is not loadable
	// until the store completes. Ask again after Drain.
	HitPending
)

// String returns "MISS", "HIT" or "HIT_PENDING".
func (r Result) String() string {
	switch r {
	case Miss:
		return "MISS"
	case Hit:
		return "HIT"
	case HitPending:
		return "HIT_PENDING"
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// Medium names the kind of memory a tier keeps blocks in, as vLLM's events
// name it ("CPU" for host memory, "DISK" for a local file). It is carried on
// every event.
type Medium string

// The media of the tiers in this module.
const (
	MediumCPU  Medium = "CPU"
	MediumDisk Medium = "DISK"
)

// EventKind tells stored blocks from removed ones.
type EventKind uint8

// The event kinds, vLLM's names.
const (
	// BlockStored: the blocks became loadable in the tier.
	BlockStored EventKind = iota + 1
	// BlockRemoved: the blocks left the tier (evicted, removed, failed,
	// reset).
	BlockRemoved
)

// String returns "BlockStored" or "BlockRemoved".
func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one change of what a tier holds. kv/events publishes it as a
// vLLM BlockStored or BlockRemoved event with medium = Medium (per event,
// not per publisher), block_hashes from the keys' hashes; a publisher that
// knows the blocks' tokens and parents (kv does) makes it self-describing.
type Event struct {
	Kind   EventKind
	Medium Medium
	// Keys are the blocks stored or removed. The slice is the event's own:
	// a consumer may keep it.
	Keys []Key
}
