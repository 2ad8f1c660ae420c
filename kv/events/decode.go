package events

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/locus-go/locus/kv"
)

// ErrMalformed is matched (errors.Is) by every error of Decode and
// DecodeMessage: the message is not a batch of vLLM's KV events.
var ErrMalformed = errors.New("events: malformed message")

// maxHashBytes is the longest digest a WireHash holds: SHA-256's, as
// kv.Hash's.
const maxHashBytes = 32

// WireHash is a block hash as it came over the wire: the 8-byte integer
// form (Uint64Hashes, vLLM's default) or a digest's bytes (ByteHashes).
// The zero WireHash is no hash (a nil parent_block_hash). It is comparable.
//
// Routers key blocks by Uint64, as llm-d does, which is equal for both
// forms of one kv.Hash; Matches compares it with an engine's kv.Hash.
type WireHash struct {
	sum [maxHashBytes]byte
	n   uint8 // bytes in sum; 0: no hash
	num bool  // the integer form (sum holds 8 bytes, big-endian)
}

// WireHashOf returns h as it goes over the wire in form f: the bytes of
// its digest (ByteHashes) or its 64-bit integer form (any other form). It
// is what Decode returns for a hash the publisher sent from h.
func WireHashOf(h kv.Hash, f HashForm) WireHash {
	if h.IsZero() {
		return WireHash{}
	}
	if f == ByteHashes {
		var w WireHash
		w.n = uint8(copy(w.sum[:], h.AppendBytes(w.sum[:0:maxHashBytes])))
		return w
	}
	return uint64Hash(h.Uint64())
}

func uint64Hash(v uint64) WireHash {
	w := WireHash{n: 8, num: true}
	binary.BigEndian.PutUint64(w.sum[:8], v)
	return w
}

// IsZero reports whether w is no hash.
func (w WireHash) IsZero() bool { return w.n == 0 }

// IsInteger reports whether w came in the integer form.
func (w WireHash) IsInteger() bool { return w.num }

// Uint64 returns the hash's 64-bit form, as kv.Hash.Uint64 does: the
// integer itself, or the digest's last 8 bytes read big-endian (0 for the
// zero WireHash).
func (w WireHash) Uint64() uint64 {
	if w.n < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(w.sum[w.n-8 : w.n])
}

// AppendBytes appends the hash's bytes: the digest, or the integer's 8
// bytes big-endian.
func (w WireHash) AppendBytes(b []byte) []byte { return append(b, w.sum[:w.n]...) }

// Matches reports whether w is what h becomes on the wire: the same
// digest, or (integer form) the same Uint64.
func (w WireHash) Matches(h kv.Hash) bool {
	if w.num {
		return !h.IsZero() && w.Uint64() == h.Uint64()
	}
	if int(w.n) != h.Len() {
		return false
	}
	var buf [maxHashBytes]byte
	return string(h.AppendBytes(buf[:0])) == string(w.sum[:w.n])
}

// String returns the hash in hex, as kv.Hash.String does (the integer
// form as its 8 bytes).
func (w WireHash) String() string { return hex.EncodeToString(w.sum[:w.n]) }

// Event is one decoded event: a kv.Event as it came over the wire, with
// its hashes as WireHash values (kv.Hash cannot be rebuilt from the wire:
// the integer form is only part of a digest). Fields map back as they were
// sent (see the package doc):
//
//	BlockStored:  Hashes, Parent (zero for nil), Tokens, BlockSize, Medium,
//	              Key.Adapter (lora_name), Key.Salt (the first block's
//	              extra key after the adapter, when Parent is zero)
//	BlockRemoved: Hashes, Medium
//
// Medium is the medium on the wire: the publisher's (such as "GPU") for
// the hot pool's events, whose kv.Event.Medium was empty.
type Event struct {
	Kind      kv.EventKind
	Hashes    []WireHash
	Parent    WireHash
	Tokens    []uint32
	BlockSize int
	Key       kv.Key
	Medium    string
	// LoRAID is vLLM's lora_id, when the publisher sent one (locus sends
	// nil: 0 here).
	LoRAID int64
}

// Batch is one decoded message: vLLM's EventBatch and, from
// DecodeMessage or a Subscription, the topic and sequence frames.
//
// Decode reuses a Batch's slices: the events and their hashes and tokens
// stay valid until the next Decode into the same Batch. Copy what you keep.
type Batch struct {
	// Topic is the message's topic frame (DecodeMessage, Subscription).
	Topic string
	// Seq is the batch's sequence number (DecodeMessage, Subscription).
	Seq uint64
	// Timestamp is when the publisher sealed the batch (the ts field; the
	// zero time when it was 0).
	Timestamp time.Time
	// Rank is vLLM's data_parallel_rank (0 when absent or nil).
	Rank int
	// Events are the batch's events, in order.
	Events []Event

	// Restarted is set by a Subscription on the first batch of a new
	// stream: the publisher restarted (its sequence numbers went back), so
	// what it said before no longer holds. A router clears the pod
	// (fleet.Index.Clear) before applying this batch.
	Restarted bool
	// Missed is set by a Subscription: batches of the stream lost just
	// before this one that the replay socket could not give back (none
	// configured, or no longer kept). The router's view of the pod is
	// incomplete from there on.
	Missed uint64
	// Replayed is set by a Subscription on a batch that came from the
	// replay socket rather than the live stream.
	Replayed bool

	hashes []WireHash
	tokens []uint32
}

// DecodeMessage decodes the three frames of a message, [topic, sequence
// number, payload] (see the package doc), into b. It fails with an error
// wrapping ErrMalformed for anything else; b then holds no events.
func DecodeMessage(frames [][]byte, b *Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrMalformed)
	}
	if len(frames) != 3 {
		b.Events = b.Events[:0]
		return fmt.Errorf("%w: %d frames; want 3 (topic, sequence, payload)", ErrMalformed, len(frames))
	}
	if len(frames[1]) != 8 {
		b.Events = b.Events[:0]
		return fmt.Errorf("%w: sequence frame of %d bytes; want 8", ErrMalformed, len(frames[1]))
	}
	if err := Decode(frames[2], b); err != nil {
		return err
	}
	if len(frames[0]) > maxTopic {
		b.Events = b.Events[:0]
		return fmt.Errorf("%w: topic of %d bytes; want at most %d", ErrMalformed, len(frames[0]), maxTopic)
	}
	b.Topic = string(frames[0])
	b.Seq = binary.BigEndian.Uint64(frames[1])
	return nil
}

// Decode decodes a payload, vLLM's EventBatch [ts, events,
// data_parallel_rank] in either encoding of events (Positional, Named)
// and either form of hashes (Uint64Hashes, ByteHashes), into b's
// Timestamp, Rank and Events; it leaves b's other fields as they are.
//
// It is strict: anything but what a publisher (this package's, or
// vLLM's) sends fails with an error wrapping ErrMalformed, naming the
// event and field, and b then holds no events. Two leniencies follow
// vLLM's history, as llm-d's decoder does: a batch may lack its rank, and
// a positional BlockStored may lack the fields vLLM added after
// block_size (lora_id, medium, lora_name, extra_keys); a named event may
// carry fields it does not know, which are skipped. It never panics, and
// what it allocates is bounded by a small multiple of len(payload), whatever
// lengths the payload claims.
//
// Use it in a router that reads the sockets itself; Subscribe does both.
// Do not use it for event kinds other than vLLM's three (BlockStored,
// BlockRemoved, AllBlocksCleared): they fail, with their whole batch.
func Decode(payload []byte, b *Batch) error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrMalformed)
	}
	b.Events = b.Events[:0]
	b.hashes, b.tokens = b.hashes[:0], b.tokens[:0]
	d := decoder{b: b}
	if err := d.batch(payload); err != nil {
		clear(b.Events[:cap(b.Events)]) // no strings of a failed batch stay reachable
		b.Events = b.Events[:0]
		return err
	}
	return nil
}

// decoder holds one Decode's state.
type decoder struct {
	b *Batch
}

func malformed(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	return fmt.Errorf("%w: %s", ErrMalformed, what)
}

func (d *decoder) batch(p []byte) error {
	var n uint32
	var err error
	var ts float64
	var rank int64
	switch msgp.NextType(p) {
	case msgp.ArrayType:
		if n, p, err = msgp.ReadArrayHeaderBytes(p); err != nil {
			return malformed("batch", err)
		}
		if n != 2 && n != 3 {
			return fmt.Errorf("%w: batch of %d elements; want [ts, events, data_parallel_rank]", ErrMalformed, n)
		}
		if ts, p, err = readTime(p); err != nil {
			return malformed("batch ts", err)
		}
		if p, err = d.events(p); err != nil {
			return err
		}
		if n == 3 {
			if rank, p, err = readOptInt(p); err != nil {
				return malformed("batch data_parallel_rank", err)
			}
		}
	case msgp.MapType:
		if n, p, err = msgp.ReadMapHeaderBytes(p); err != nil {
			return malformed("batch", err)
		}
		seen := false
		for range n {
			var k []byte
			if k, p, err = msgp.ReadStringZC(p); err != nil {
				return malformed("batch key", err)
			}
			switch string(k) {
			case "ts":
				ts, p, err = readTime(p)
			case "events":
				if seen {
					return fmt.Errorf("%w: batch: events twice", ErrMalformed)
				}
				seen = true
				if p, err = d.events(p); err != nil {
					return err
				}
			case "data_parallel_rank":
				rank, p, err = readOptInt(p)
			default:
				p, err = msgp.Skip(p)
			}
			if err != nil {
				return malformed("batch "+string(k), err)
			}
		}
		if !seen {
			return fmt.Errorf("%w: batch without events", ErrMalformed)
		}
	default:
		return fmt.Errorf("%w: batch: %v; want an array", ErrMalformed, msgp.NextType(p))
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, len(p))
	}
	if rank < 0 || rank > math.MaxInt32 {
		return fmt.Errorf("%w: data_parallel_rank %d", ErrMalformed, rank)
	}
	if math.IsNaN(ts) || math.IsInf(ts, 0) || ts < 0 || ts > 1<<40 {
		return fmt.Errorf("%w: ts %v", ErrMalformed, ts)
	}
	d.b.Rank = int(rank)
	d.b.Timestamp = time.Time{}
	if ts > 0 {
		sec, frac := math.Modf(ts)
		d.b.Timestamp = time.Unix(int64(sec), int64(frac*1e9))
	}
	return nil
}

// readTime reads ts: a float, or an integer of seconds.
func readTime(p []byte) (float64, []byte, error) {
	switch msgp.NextType(p) {
	case msgp.Float64Type, msgp.Float32Type:
		return msgp.ReadFloat64Bytes(p)
	case msgp.UintType, msgp.IntType:
		v, o, err := msgp.ReadInt64Bytes(p)
		return float64(v), o, err
	}
	return 0, p, fmt.Errorf("%v; want a number", msgp.NextType(p))
}

// readOptInt reads nil (0) or an integer.
func readOptInt(p []byte) (int64, []byte, error) {
	if msgp.IsNil(p) {
		o, err := msgp.ReadNilBytes(p)
		return 0, o, err
	}
	return msgp.ReadInt64Bytes(p)
}

// readOptString reads nil ("") or a string.
func readOptString(p []byte) (string, []byte, error) {
	if msgp.IsNil(p) {
		o, err := msgp.ReadNilBytes(p)
		return "", o, err
	}
	s, o, err := msgp.ReadStringZC(p)
	if err != nil {
		return "", o, err
	}
	if len(s) > maxTopic {
		return "", o, fmt.Errorf("string of %d bytes; want at most %d", len(s), maxTopic)
	}
	return internString(s), o, nil
}

// internString returns s as a string, without allocating for the media
// every event carries.
func internString(s []byte) string {
	switch string(s) {
	case "GPU":
		return "GPU"
	case "CPU":
		return "CPU"
	case "DISK":
		return "DISK"
	case "":
		return ""
	}
	return string(s)
}

func (d *decoder) events(p []byte) ([]byte, error) {
	n, p, err := msgp.ReadArrayHeaderBytes(p)
	if err != nil {
		return p, malformed("events", err)
	}
	if int(n) > len(p) { // every event takes a byte at least
		return p, fmt.Errorf("%w: %d events in %d bytes", ErrMalformed, n, len(p))
	}
	for i := range int(n) {
		d.b.Events = append(d.b.Events, Event{})
		ev := &d.b.Events[len(d.b.Events)-1]
		if p, err = d.event(p, ev); err != nil {
			return p, fmt.Errorf("event %d: %w", i, err)
		}
	}
	return p, nil
}

// The fields of an event, in vLLM's order after the tag.
const (
	fHashes = iota
	fParent
	fTokens
	fBlockSize
	fLoRAID
	fMedium
	fLoRAName
	fExtraKeys
	nFields
)

var storedFields = [nFields]string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys"}

func fieldOf(name string) int {
	for i, f := range storedFields {
		if f == name {
			return i
		}
	}
	return -1
}

// eventState is what an event's fields left for its last checks: the
// extra keys are read before or after lora_name and parent, so the salt
// is picked at the end.
type eventState struct {
	seen   [nFields]bool
	extras [][]byte // the first block's extra keys that are strings
}

func (d *decoder) event(p []byte, ev *Event) ([]byte, error) {
	var st eventState
	var err error
	switch msgp.NextType(p) {
	case msgp.ArrayType:
		var n uint32
		if n, p, err = msgp.ReadArrayHeaderBytes(p); err != nil {
			return p, malformed("event", err)
		}
		if n == 0 {
			return p, fmt.Errorf("%w: empty event", ErrMalformed)
		}
		var tag []byte
		if tag, p, err = msgp.ReadStringZC(p); err != nil {
			return p, malformed("event tag", err)
		}
		if err = setKind(ev, tag); err != nil {
			return p, err
		}
		fields := fieldsOf(ev.Kind)
		n--
		if want := minFields(ev.Kind); int(n) < want {
			return p, fmt.Errorf("%w: %v of %d fields; want %d or more", ErrMalformed, ev.Kind, n, want)
		}
		for i := range int(n) {
			if i >= len(fields) {
				if p, err = msgp.Skip(p); err != nil {
					return p, malformed(fmt.Sprintf("%v: field %d", ev.Kind, i+1), err)
				}
				continue
			}
			if p, err = d.field(p, ev, &st, fields[i]); err != nil {
				return p, err
			}
		}
	case msgp.MapType:
		var n uint32
		if n, p, err = msgp.ReadMapHeaderBytes(p); err != nil {
			return p, malformed("event", err)
		}
		// The tag comes first (msgspec writes it first); the fields
		// after it in any order.
		if n == 0 {
			return p, fmt.Errorf("%w: empty event", ErrMalformed)
		}
		var k, tag []byte
		if k, p, err = msgp.ReadStringZC(p); err != nil || string(k) != "type" {
			return p, malformed("event: want \"type\" first", err)
		}
		if tag, p, err = msgp.ReadStringZC(p); err != nil {
			return p, malformed("event type", err)
		}
		if err = setKind(ev, tag); err != nil {
			return p, err
		}
		fields := fieldsOf(ev.Kind)
		for range n - 1 {
			if k, p, err = msgp.ReadStringZC(p); err != nil {
				return p, malformed(ev.Kind.String()+": field name", err)
			}
			f := fieldOf(string(k))
			known := false
			for _, have := range fields {
				known = known || have == f
			}
			if !known {
				if p, err = msgp.Skip(p); err != nil {
					return p, malformed(ev.Kind.String()+": "+string(k), err)
				}
				continue
			}
			if st.seen[f] {
				return p, fmt.Errorf("%w: %v: %s twice", ErrMalformed, ev.Kind, k)
			}
			if p, err = d.field(p, ev, &st, f); err != nil {
				return p, err
			}
		}
		if ev.Kind == kv.BlockStored && (!st.seen[fHashes] || !st.seen[fTokens] || !st.seen[fBlockSize]) ||
			ev.Kind == kv.BlockRemoved && !st.seen[fHashes] {
			return p, fmt.Errorf("%w: %v without its block_hashes, token_ids or block_size", ErrMalformed, ev.Kind)
		}
	default:
		return p, fmt.Errorf("%w: event: %v; want an array or a map", ErrMalformed, msgp.NextType(p))
	}
	return p, finish(ev, &st)
}

func setKind(ev *Event, tag []byte) error {
	switch string(tag) {
	case "BlockStored":
		ev.Kind = kv.BlockStored
	case "BlockRemoved":
		ev.Kind = kv.BlockRemoved
	case "AllBlocksCleared":
		ev.Kind = kv.AllBlocksCleared
	default:
		if len(tag) > 64 {
			tag = tag[:64]
		}
		return fmt.Errorf("%w: unknown event %q", ErrMalformed, tag)
	}
	return nil
}

var (
	storedOrder  = []int{fHashes, fParent, fTokens, fBlockSize, fLoRAID, fMedium, fLoRAName, fExtraKeys}
	removedOrder = []int{fHashes, fMedium}
)

// minFields is how many fields a positional event must have: those of
// vLLM's first events (later versions appended the rest).
func minFields(k kv.EventKind) int {
	switch k {
	case kv.BlockStored:
		return fBlockSize + 1
	case kv.BlockRemoved:
		return 1
	}
	return 0
}

func fieldsOf(k kv.EventKind) []int {
	switch k {
	case kv.BlockStored:
		return storedOrder
	case kv.BlockRemoved:
		return removedOrder
	}
	return nil
}

// field reads field f of ev.
func (d *decoder) field(p []byte, ev *Event, st *eventState, f int) ([]byte, error) {
	st.seen[f] = true
	var err error
	var v int64
	switch f {
	case fHashes:
		start := len(d.b.hashes)
		if d.b.hashes, p, err = readHashes(d.b.hashes, p); err == nil {
			ev.Hashes = d.b.hashes[start:len(d.b.hashes):len(d.b.hashes)]
		}
	case fParent:
		if msgp.IsNil(p) {
			p, err = msgp.ReadNilBytes(p)
		} else {
			ev.Parent, p, err = readHash(p)
		}
	case fTokens:
		start := len(d.b.tokens)
		if d.b.tokens, p, err = readTokens(d.b.tokens, p); err == nil {
			ev.Tokens = d.b.tokens[start:len(d.b.tokens):len(d.b.tokens)]
		}
	case fBlockSize:
		if v, p, err = msgp.ReadInt64Bytes(p); err == nil && (v < 0 || v > math.MaxInt32) {
			err = fmt.Errorf("%d", v)
		}
		ev.BlockSize = int(v)
	case fLoRAID:
		ev.LoRAID, p, err = readOptInt(p)
	case fMedium:
		ev.Medium, p, err = readOptString(p)
	case fLoRAName:
		ev.Key.Adapter, p, err = readOptString(p)
	case fExtraKeys:
		p, err = readExtraKeys(p, st)
	}
	if err != nil {
		return p, malformed(ev.Kind.String()+": "+storedFields[f], err)
	}
	return p, nil
}

// finish checks what spans fields and picks the salt.
func finish(ev *Event, st *eventState) error {
	if ev.Kind != kv.BlockStored {
		return nil
	}
	if len(ev.Tokens) != 0 && len(ev.Tokens) != ev.BlockSize*len(ev.Hashes) {
		return fmt.Errorf("%w: BlockStored: %d token ids for %d blocks of %d", ErrMalformed, len(ev.Tokens), len(ev.Hashes), ev.BlockSize)
	}
	x := st.extras
	if ev.Key.Adapter != "" && len(x) > 0 && string(x[0]) == ev.Key.Adapter {
		x = x[1:]
	}
	if ev.Parent.IsZero() && len(x) > 0 {
		if len(x[0]) > maxTopic {
			return fmt.Errorf("%w: BlockStored: salt of %d bytes", ErrMalformed, len(x[0]))
		}
		ev.Key.Salt = string(x[0])
	}
	return nil
}

func readHash(p []byte) (WireHash, []byte, error) {
	switch msgp.NextType(p) {
	case msgp.UintType, msgp.IntType:
		v, o, err := msgp.ReadUint64Bytes(p)
		if err != nil {
			return WireHash{}, o, err
		}
		return uint64Hash(v), o, nil
	case msgp.BinType:
		b, o, err := msgp.ReadBytesZC(p)
		if err != nil {
			return WireHash{}, o, err
		}
		if len(b) < 8 || len(b) > maxHashBytes {
			return WireHash{}, o, fmt.Errorf("hash of %d bytes; want 8 to %d", len(b), maxHashBytes)
		}
		var w WireHash
		w.n = uint8(copy(w.sum[:], b))
		return w, o, nil
	}
	return WireHash{}, p, fmt.Errorf("hash: %v; want an integer or bin", msgp.NextType(p))
}

func readHashes(dst []WireHash, p []byte) ([]WireHash, []byte, error) {
	n, p, err := msgp.ReadArrayHeaderBytes(p)
	if err != nil {
		return dst, p, err
	}
	if int(n) > len(p) {
		return dst, p, fmt.Errorf("%d hashes in %d bytes", n, len(p))
	}
	for range n {
		var w WireHash
		if w, p, err = readHash(p); err != nil {
			return dst, p, err
		}
		dst = append(dst, w)
	}
	return dst, p, nil
}

func readTokens(dst []uint32, p []byte) ([]uint32, []byte, error) {
	n, p, err := msgp.ReadArrayHeaderBytes(p)
	if err != nil {
		return dst, p, err
	}
	if int(n) > len(p) {
		return dst, p, fmt.Errorf("%d token ids in %d bytes", n, len(p))
	}
	for range n {
		var v uint64
		if v, p, err = msgp.ReadUint64Bytes(p); err != nil {
			return dst, p, err
		}
		if v > math.MaxUint32 {
			return dst, p, fmt.Errorf("token id %d", v)
		}
		dst = append(dst, uint32(v))
	}
	return dst, p, nil
}

// readExtraKeys reads extra_keys: nil, or one entry per block, each nil or
// an array. It keeps the first block's string keys (the adapter name and
// the salt, as kv/events sends them); others (vLLM's multimodal hashes)
// are skipped.
func readExtraKeys(p []byte, st *eventState) ([]byte, error) {
	if msgp.IsNil(p) {
		return msgp.ReadNilBytes(p)
	}
	n, p, err := msgp.ReadArrayHeaderBytes(p)
	if err != nil {
		return p, err
	}
	if int(n) > len(p) {
		return p, fmt.Errorf("%d entries in %d bytes", n, len(p))
	}
	for i := range n {
		if msgp.IsNil(p) {
			if p, err = msgp.ReadNilBytes(p); err != nil {
				return p, err
			}
			continue
		}
		var m uint32
		if m, p, err = msgp.ReadArrayHeaderBytes(p); err != nil {
			return p, err
		}
		for range m {
			if i == 0 && msgp.NextType(p) == msgp.StrType && len(st.extras) < 2 {
				var s []byte
				if s, p, err = msgp.ReadStringZC(p); err != nil {
					return p, err
				}
				st.extras = append(st.extras, s)
				continue
			}
			if p, err = msgp.Skip(p); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}
