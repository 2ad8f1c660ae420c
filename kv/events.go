package kv

import "github.com/locus-go/locus/tier"

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
//	both:         medium = Medium (the publisher's when empty)
//
// The hot pool's events have an empty Medium. With tiers (WithTiers) the
// manager also emits the events of every tier that names its medium and
// hands its events over (every *tier.Manager does), with Medium the
// tier's ("CPU", "DISK", ...):
//
//   - BlockStored when the blocks' store into the tier completes, at
//     Drain, after the hot pool's BlockStored of the same blocks. It is
//     self-describing as the hot pool's is (hashes, parent, tokens, block
//     size, key), so a router that lost the hot pool's event still
//     indexes the blocks. Only a block stored by write-back (whose tokens
//     the manager no longer has) is sent as vLLM's offload placeholder:
//     its hash alone, no parent, no tokens, no key. A failed or stale
//     store emits nothing.
//   - BlockRemoved when the tier drops blocks (eviction, a corrupt block,
//     the tier's Reset), with their hashes, at the Drain that made the
//     tier drop them or, for the engine's own calls (Reset), the next.
//
// A hash is exported as vLLM does, as its bytes (Hash.AppendBytes) or as
// a 64-bit integer (Hash.Uint64).
//
// A Parent can be a block already removed: when two sequences fill an
// equal block at once, the first copy is cached and announced and the
// second stays private (no event); if the cached copy is evicted, the
// second sequence's next full block is stored with the removed hash as
// its parent. A router such as llm-d drops such a block, and rightly:
// the manager cannot serve it as a prefix hit either, since a hit walks
// the chain from its first block. vLLM indexes both copies instead but
// announces the first copy's eviction all the same, so its router loses
// the same block.
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
	// Medium is the tier the event is about: empty for the hot pool (a
	// publisher writes its own medium, "GPU" by default), else the
	// tier.Medium of one of WithTiers' tiers, such as "CPU".
	Medium string
}

// eventLog builds the hot pool's cache events and decides when the
// subscriber sees them, which is what a router sees of the manager:
//
//   - the cached blocks one call evicts (to make room, down to the low
//     watermark at Drain, or at Reset), as one BlockRemoved before the
//     call returns and before that call's BlockStored;
//   - the blocks one call enters into the prefix cache, as one BlockStored
//     per run that chains (a run breaks at a block already cached, and at
//     the end of the call);
//   - AllBlocksCleared in place of the removals of a Reset that empties
//     everything a router could hold.
//
// Without a subscriber it keeps nothing. It is owner state: every method
// runs on the owner goroutine.
type eventLog struct {
	sub         func(*Event)
	event       Event // reused; BlockSize set at New
	removedHash []Hash
	storedHash  []Hash
	storedToken []uint32
	panics      uint64 // events lost to a panicking subscriber
}

// stored records that block h, child of parent, with tokens, entered the
// cache; a run of them goes out at the next flushStored.
func (l *eventLog) stored(parent, h Hash, tokens []uint32) {
	if l.sub == nil {
		return
	}
	if len(l.storedHash) == 0 {
		l.event.Parent = parent
	}
	l.storedHash = append(l.storedHash, h)
	l.storedToken = append(l.storedToken, tokens...)
}

// removed records that cached block h left the cache.
func (l *eventLog) removed(h Hash) {
	if l.sub != nil {
		l.removedHash = append(l.removedHash, h)
	}
}

// flushStored emits the run of stored blocks, all of key.
func (l *eventLog) flushStored(key Key) {
	if len(l.storedHash) == 0 {
		return
	}
	l.event.Tokens, l.event.Key = l.storedToken, key
	l.emit(BlockStored, l.storedHash)
	l.event.Tokens, l.event.Key = nil, Key{}
	clear(l.storedHash)
	l.storedHash = l.storedHash[:0]
	l.storedToken = l.storedToken[:0]
}

// flushRemoved emits the removals recorded since the last flush.
func (l *eventLog) flushRemoved() {
	if len(l.removedHash) == 0 {
		return
	}
	l.emit(BlockRemoved, l.removedHash)
	clear(l.removedHash)
	l.removedHash = l.removedHash[:0]
}

// clearedAll replaces the removals recorded since the last flush by one
// AllBlocksCleared.
func (l *eventLog) clearedAll() {
	if l.sub == nil {
		return
	}
	clear(l.removedHash)
	l.removedHash = l.removedHash[:0]
	l.emit(AllBlocksCleared, nil)
}

func (l *eventLog) emit(kind EventKind, hashes []Hash) {
	l.event.Kind, l.event.Hashes = kind, hashes
	l.deliver(&l.event)
	l.event.Hashes, l.event.Parent = nil, Hash{}
}

// deliver passes ev to the subscriber. A subscriber that panics loses that
// event, and only that event: deliver recovers and counts it, so the
// manager's call goes on with its state consistent.
func (l *eventLog) deliver(ev *Event) {
	defer func() {
		if recover() != nil {
			l.panics++
		}
	}()
	l.sub(ev)
}

// tierEventSource is what a tier needs for a Manager with a subscriber to
// emit its events: a medium to name, and the events it records. Every
// *tier.Manager has both.
type tierEventSource interface {
	Medium() tier.Medium
	TakeEvents(dst []tier.Event) []tier.Event
}

// tierEvents builds the events of a Manager's tiers; see Event. It is
// used only with a subscriber (on).
type tierEvents struct {
	on     bool
	src    []tierEventSource // per tier; nil: the tier emits no events
	medium []string          // per tier
	// meta holds, by pool block index, what the BlockStored events of a
	// write-through block need, from its indexing until its last store
	// completes (its copy holds drop to zero): only blocks in flight.
	meta   map[int32]storeMeta
	free   [][]uint32 // token buffers of meta not in use
	event  Event
	hashes []Hash
	tokens []uint32
	taken  []tier.Event
}

// storeMeta is what a tier's BlockStored of one block needs beyond its
// hash.
type storeMeta struct {
	parent Hash
	key    Key
	tokens []uint32
}

// initTierEvents sets up the tiers' events: with a subscriber, for every
// tier that is a tierEventSource with a non-empty medium.
func (m *Manager) initTierEvents() {
	te := &m.tev
	if m.cfg.subscriber == nil || len(m.tiers) == 0 {
		return
	}
	te.on = true
	te.src = make([]tierEventSource, len(m.tiers))
	te.medium = make([]string, len(m.tiers))
	for t := range m.tiers {
		if s, ok := m.tiers[t].t.(tierEventSource); ok && s.Medium() != "" {
			te.src[t], te.medium[t] = s, string(s.Medium())
		}
	}
	te.meta = make(map[int32]storeMeta)
	te.event.BlockSize = m.bs
}

// keepForStore keeps what the tiers' BlockStored of block bi (of parent
// hash parent, key key and tokens) need until its stores complete.
func (m *Manager) keepForStore(bi int32, parent Hash, key Key, tokens []uint32) {
	te := &m.tev
	if !te.on {
		return
	}
	m.dropStoreMeta(bi)
	var buf []uint32
	if n := len(te.free); n > 0 {
		buf, te.free = te.free[n-1][:0], te.free[:n-1]
	}
	te.meta[bi] = storeMeta{parent: parent, key: key, tokens: append(buf, tokens...)}
}

// dropStoreMeta forgets what keepForStore kept of block bi, if anything:
// its stores are over.
func (m *Manager) dropStoreMeta(bi int32) {
	te := &m.tev
	if !te.on {
		return
	}
	if md, ok := te.meta[bi]; ok {
		te.free = append(te.free, md.tokens[:0])
		delete(te.meta, bi)
	}
}

// emitTierStored emits tier t's BlockStored events of blocks, pool block
// indices whose store into it completed, in the store's order: one event
// per run of blocks that chain (each the parent of the next, one key), and
// one per run of blocks kept without tokens (placeholders).
func (m *Manager) emitTierStored(t int, blocks []int32) {
	te := &m.tev
	if !te.on || te.src[t] == nil {
		return
	}
	te.hashes, te.tokens = te.hashes[:0], te.tokens[:0]
	var parent Hash
	var key Key
	placeholder := false
	for _, bi := range blocks {
		h := m.blocks[bi].hash
		if h.IsZero() {
			continue // not cached: nothing a router could index
		}
		md, self := te.meta[bi]
		if n := len(te.hashes); n > 0 {
			chained := self && !placeholder && md.parent == te.hashes[n-1] && md.key == key
			if !chained && !(placeholder && !self) {
				m.emitTier(BlockStored, t, parent, key)
			}
		}
		if len(te.hashes) == 0 {
			placeholder = !self
			parent, key = md.parent, md.key // zero for a placeholder
		}
		te.hashes = append(te.hashes, h)
		te.tokens = append(te.tokens, md.tokens...)
	}
	if len(te.hashes) > 0 {
		m.emitTier(BlockStored, t, parent, key)
	}
}

// takeTierEvents emits a BlockRemoved for every removal tier t recorded
// since the last call. Its BlockStored events are not republished: kv
// emits its own, self-describing, as the stores complete.
func (m *Manager) takeTierEvents(t int) {
	te := &m.tev
	if !te.on || te.src[t] == nil {
		return
	}
	te.taken = te.src[t].TakeEvents(te.taken[:0])
	n := uint8(m.cfg.algo.size())
	for _, ev := range te.taken {
		if ev.Kind != tier.BlockRemoved || len(ev.Keys) == 0 {
			continue
		}
		te.hashes = te.hashes[:0]
		for _, k := range ev.Keys {
			te.hashes = append(te.hashes, Hash{sum: k.Hash, n: n})
		}
		m.emitTier(BlockRemoved, t, Hash{}, Key{})
	}
	clear(te.taken)
	te.taken = te.taken[:0]
}

// emitTier passes the event of tier t built in te.hashes and te.tokens
// to the subscriber, and empties them.
func (m *Manager) emitTier(kind EventKind, t int, parent Hash, key Key) {
	te := &m.tev
	ev := &te.event
	ev.Kind, ev.Medium, ev.Hashes, ev.Parent, ev.Key = kind, te.medium[t], te.hashes, parent, key
	if kind == BlockStored {
		ev.Tokens = te.tokens
	}
	m.log.deliver(ev)
	*ev = Event{BlockSize: m.bs}
	te.hashes, te.tokens = te.hashes[:0], te.tokens[:0]
}
