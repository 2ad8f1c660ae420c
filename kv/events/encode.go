package events

import (
	"encoding/binary"

	"github.com/go-zeromq/zmq4"
	"github.com/tinylib/msgp/msgp"

	"github.com/locus-go/locus/kv"
)

// encoder writes batches in vLLM's wire format (see the package doc). It
// belongs to the publisher's goroutine.
type encoder struct {
	named  bool
	bytes  bool
	medium string
	rank   uint64
	topic  []byte
	hint   int // the size of the last payload, to allocate the next at once
}

func newEncoder(c *config) encoder {
	return encoder{
		named:  c.encoding == Named,
		bytes:  c.hashes == ByteHashes,
		medium: c.medium,
		rank:   uint64(c.rank),
		topic:  []byte(c.topic),
	}
}

// message returns b as the three frames of a ZMQ message: topic, sequence
// number, payload. The sequence number and the payload share one fresh
// allocation, which the socket keeps until it has written them.
func (e *encoder) message(b *batch) zmq4.Msg {
	buf := make([]byte, 8, 8+e.hint)
	binary.BigEndian.PutUint64(buf, b.seq)
	buf = e.appendBatch(buf, b)
	e.hint = len(buf) - 8
	return zmq4.NewMsgFrom(e.topic, buf[:8:8], buf[8:])
}

// appendBatch appends vLLM's EventBatch: [ts, events, data_parallel_rank].
func (e *encoder) appendBatch(dst []byte, b *batch) []byte {
	dst = msgp.AppendArrayHeader(dst, 3)
	dst = msgp.AppendFloat64(dst, float64(b.ts.Unix())+float64(b.ts.Nanosecond())/1e9)
	dst = msgp.AppendArrayHeader(dst, uint32(len(b.recs)))
	hashes, tokens := b.hash, b.toks
	for i := range b.recs {
		r := &b.recs[i]
		dst = e.appendEvent(dst, r, hashes[:r.hashes], tokens[:r.tokens])
		hashes, tokens = hashes[r.hashes:], tokens[r.tokens:]
	}
	return msgp.AppendUint64(dst, e.rank)
}

func (e *encoder) appendEvent(dst []byte, r *record, hashes []kv.Hash, tokens []uint32) []byte {
	switch r.kind {
	case kv.BlockStored:
		dst = e.head(dst, "BlockStored", 9)
		dst = e.appendHashes(e.key(dst, "block_hashes"), hashes)
		dst = e.key(dst, "parent_block_hash")
		if r.parent.IsZero() {
			dst = msgp.AppendNil(dst)
		} else {
			dst = e.appendHash(dst, r.parent)
		}
		dst = e.key(dst, "token_ids")
		dst = msgp.AppendArrayHeader(dst, uint32(len(tokens)))
		for _, t := range tokens {
			dst = msgp.AppendUint32(dst, t)
		}
		dst = msgp.AppendUint64(e.key(dst, "block_size"), uint64(max(r.blockSize, 0)))
		dst = msgp.AppendNil(e.key(dst, "lora_id"))
		dst = appendOptString(e.key(dst, "medium"), e.mediumOf(r))
		dst = appendOptString(e.key(dst, "lora_name"), r.key.Adapter)
		dst = e.key(dst, "extra_keys")
		dst = msgp.AppendArrayHeader(dst, uint32(len(hashes)))
		for i := range hashes {
			dst = appendExtraKeys(dst, r.key.Adapter, firstSalt(r, i))
		}
	case kv.BlockRemoved:
		dst = e.head(dst, "BlockRemoved", 3)
		dst = e.appendHashes(e.key(dst, "block_hashes"), hashes)
		dst = appendOptString(e.key(dst, "medium"), e.mediumOf(r))
	default: // kv.AllBlocksCleared; record filters the kinds
		dst = e.head(dst, "AllBlocksCleared", 1)
	}
	return dst
}

// mediumOf returns the medium of r on the wire: the event's own (a tier's,
// such as "CPU"), else the publisher's (WithMedium), the hot pool's.
func (e *encoder) mediumOf(r *record) string {
	if r.medium != "" {
		return r.medium
	}
	return e.medium
}

// head starts an event of n elements, its tag included: an array whose
// first element is the tag, or a map whose first entry is "type": tag.
func (e *encoder) head(dst []byte, tag string, n uint32) []byte {
	if e.named {
		dst = msgp.AppendString(msgp.AppendMapHeader(dst, n), "type")
	} else {
		dst = msgp.AppendArrayHeader(dst, n)
	}
	return msgp.AppendString(dst, tag)
}

// key appends a field's name in the named encoding, nothing in the
// positional one.
func (e *encoder) key(dst []byte, name string) []byte {
	if e.named {
		return msgp.AppendString(dst, name)
	}
	return dst
}

func (e *encoder) appendHashes(dst []byte, hashes []kv.Hash) []byte {
	dst = msgp.AppendArrayHeader(dst, uint32(len(hashes)))
	for _, h := range hashes {
		dst = e.appendHash(dst, h)
	}
	return dst
}

func (e *encoder) appendHash(dst []byte, h kv.Hash) []byte {
	if e.bytes {
		return h.AppendBytes(msgp.AppendBytesHeader(dst, uint32(h.Len())))
	}
	return appendUint64Fixed(dst, h.Uint64())
}

// appendUint64Fixed appends v as a MessagePack uint 64 (0xcf and 8 bytes,
// big-endian) whatever its value. A hash is always sent in this form: the
// shortest form of a hash below 2^32 is a shorter integer, which llm-d's
// indexer rejects (with the whole batch) where it expects a uint64, while
// every decoder accepts the 8-byte form for any value.
func appendUint64Fixed(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendOptString(dst []byte, s string) []byte {
	if s == "" {
		return msgp.AppendNil(dst)
	}
	return msgp.AppendString(dst, s)
}

// firstSalt returns the salt block i of r is hashed with: the key's salt in
// a sequence's first block, nothing elsewhere.
func firstSalt(r *record, i int) string {
	if i == 0 && r.parent.IsZero() {
		return r.key.Salt
	}
	return ""
}

// appendExtraKeys appends vLLM's extra keys of one block: nil, or the
// array of the adapter name and the salt, whichever are set.
func appendExtraKeys(dst []byte, adapter, salt string) []byte {
	n := uint32(0)
	if adapter != "" {
		n++
	}
	if salt != "" {
		n++
	}
	if n == 0 {
		return msgp.AppendNil(dst)
	}
	dst = msgp.AppendArrayHeader(dst, n)
	if adapter != "" {
		dst = msgp.AppendString(dst, adapter)
	}
	if salt != "" {
		dst = msgp.AppendString(dst, salt)
	}
	return dst
}
