package events_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
)

// wait bounds every wait of these tests.
const wait = 20 * time.Second

// subscriber is a router's end of the stream: a ZMQ SUB socket on the
// loopback interface.
type subscriber struct {
	sock zmq4.Socket
	msgs chan zmq4.Msg
}

// subscribe connects a subscriber of topic to p and waits until p sees
// the subscription, so that nothing published afterwards is missed.
func subscribe(t *testing.T, p *events.Publisher, topic string) *subscriber {
	t.Helper()
	s := newSubscriber(t, topic)
	require.NoError(t, s.sock.Dial("tcp://"+p.Addr().String()))
	deadline := time.Now().Add(wait)
	for !events.Subscribed(p) {
		require.True(t, time.Now().Before(deadline), "the publisher never saw the subscription")
		time.Sleep(time.Millisecond)
	}
	return s
}

func newSubscriber(t *testing.T, topic string) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{
		sock: zmq4.NewSub(ctx, zmq4.WithAutomaticReconnect(false)),
		msgs: make(chan zmq4.Msg, 1<<16),
	}
	require.NoError(t, s.sock.SetOption(zmq4.OptionSubscribe, topic))
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		s.sock.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			msg, err := s.sock.Recv()
			if err != nil {
				return
			}
			s.msgs <- msg
		}
	}()
	return s
}

// next returns the next message: its topic, its sequence number and its
// decoded payload.
func (s *subscriber) next(t *testing.T) (string, uint64, wireBatch) {
	t.Helper()
	select {
	case msg := <-s.msgs:
		return decodeMessage(t, msg)
	case <-time.After(wait):
		t.Fatal("no message")
	}
	panic("unreachable")
}

// none checks that no message arrives within d.
func (s *subscriber) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case msg := <-s.msgs:
		t.Fatalf("unexpected message %v", msg)
	case <-time.After(d):
	}
}

// wireBatch is a decoded EventBatch.
type wireBatch struct {
	ts     float64
	rank   any
	events []wireEvent
}

// wireEvent is a decoded event: its tag and its fields by vLLM's names, in
// the order they came.
type wireEvent struct {
	tag    string
	names  []string
	fields map[string]any
}

// vLLM's fields of each event, in order, after the tag: the schema of its
// kv_events.py (and of llm-d's decoder) for array-encoded events.
var schema = map[string][]string{
	"BlockStored":      {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys"},
	"BlockRemoved":     {"block_hashes", "medium"},
	"AllBlocksCleared": {},
}

// decodeMessage decodes a message as a router does: three frames, an
// 8-byte big-endian sequence number, and a MessagePack payload decoded
// generically (vmihailenco/msgpack, llm-d's decoder) rather than into the
// publisher's own types.
func decodeMessage(t *testing.T, msg zmq4.Msg) (string, uint64, wireBatch) {
	t.Helper()
	require.Len(t, msg.Frames, 3, "frames")
	require.Len(t, msg.Frames[1], 8, "sequence frame")
	seq := binary.BigEndian.Uint64(msg.Frames[1])
	var top []any
	require.NoError(t, msgpack.Unmarshal(msg.Frames[2], &top))
	require.Len(t, top, 3, "EventBatch: [ts, events, data_parallel_rank]")
	ts, ok := top[0].(float64)
	require.True(t, ok, "ts is a %T, want float64", top[0])
	raw, ok := top[1].([]any)
	require.True(t, ok, "events is a %T", top[1])
	b := wireBatch{ts: ts, rank: top[2]}
	// Decode the events again, one by one, keeping the order of map keys.
	d := msgpack.NewDecoder(bytes.NewReader(msg.Frames[2]))
	_, err := d.DecodeArrayLen()
	require.NoError(t, err)
	_, err = d.DecodeFloat64()
	require.NoError(t, err)
	n, err := d.DecodeArrayLen()
	require.NoError(t, err)
	require.Equal(t, len(raw), n)
	for range n {
		b.events = append(b.events, decodeEvent(t, d))
	}
	return string(msg.Frames[0]), seq, b
}

func decodeEvent(t *testing.T, d *msgpack.Decoder) wireEvent {
	t.Helper()
	code, err := d.PeekCode()
	require.NoError(t, err)
	switch {
	case code>>4 == 0x9 || code == 0xdc || code == 0xdd: // an array: the positional encoding
	case code>>4 == 0x8 || code == 0xde || code == 0xdf: // a map: the named encoding
		return decodeMapEvent(t, d)
	default:
		t.Fatalf("event is neither an array nor a map: code %#x", code)
	}
	n, err := d.DecodeArrayLen()
	require.NoError(t, err)
	require.Positive(t, n, "an event array holds its tag")
	ev := wireEvent{fields: map[string]any{}}
	ev.tag, err = d.DecodeString()
	require.NoError(t, err, "the tag is a string")
	names, ok := schema[ev.tag]
	require.True(t, ok, "unknown tag %q", ev.tag)
	require.Len(t, names, n-1, "fields of %s", ev.tag)
	for _, name := range names {
		v, err := d.DecodeInterface()
		require.NoError(t, err)
		ev.names = append(ev.names, name)
		ev.fields[name] = v
	}
	return ev
}

func decodeMapEvent(t *testing.T, d *msgpack.Decoder) wireEvent {
	t.Helper()
	n, err := d.DecodeMapLen()
	require.NoError(t, err)
	ev := wireEvent{fields: map[string]any{}}
	for i := range n {
		k, err := d.DecodeString()
		require.NoError(t, err)
		v, err := d.DecodeInterface()
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, "type", k, "the tag comes first")
			ev.tag = v.(string)
			continue
		}
		ev.names = append(ev.names, k)
		ev.fields[k] = v
	}
	names, ok := schema[ev.tag]
	require.True(t, ok, "unknown tag %q", ev.tag)
	require.Equal(t, names, append([]string{}, ev.names...), "fields of %s", ev.tag)
	return ev
}

// unsigned returns an integer that must have been encoded in an unsigned
// (or positive fixint) form, as msgspec encodes a non-negative int.
func unsigned(t *testing.T, v any) uint64 {
	t.Helper()
	switch x := v.(type) {
	case int8:
		require.GreaterOrEqual(t, x, int8(0), "positive fixint")
		return uint64(x)
	case uint8:
		return uint64(x)
	case uint16:
		return uint64(x)
	case uint32:
		return uint64(x)
	case uint64:
		return x
	}
	t.Fatalf("%v is a %T, want an unsigned integer", v, v)
	return 0
}

// form says how the expected events were configured.
type form struct {
	hashes events.HashForm
	medium any // nil or the string
}

// checkEvent checks every field of a decoded event against the kv.Event it
// came from: its medium is the event's own, else f's (the publisher's).
func checkEvent(t *testing.T, f form, want kv.Event, got wireEvent) {
	t.Helper()
	if want.Medium != "" {
		f.medium = want.Medium
	}
	require.Equal(t, want.Kind.String(), got.tag)
	switch want.Kind {
	case kv.BlockStored:
		checkHashes(t, f, want.Hashes, got.fields["block_hashes"])
		if want.Parent.IsZero() {
			require.Nil(t, got.fields["parent_block_hash"])
		} else {
			checkHash(t, f, want.Parent, got.fields["parent_block_hash"])
		}
		toks, ok := got.fields["token_ids"].([]any)
		require.True(t, ok, "token_ids")
		require.Len(t, toks, len(want.Tokens))
		for i, tok := range toks {
			require.Equal(t, uint64(want.Tokens[i]), unsigned(t, tok), "token %d", i)
		}
		require.Equal(t, uint64(want.BlockSize), unsigned(t, got.fields["block_size"]))
		require.Nil(t, got.fields["lora_id"])
		require.Equal(t, f.medium, got.fields["medium"])
		if want.Key.Adapter == "" {
			require.Nil(t, got.fields["lora_name"])
		} else {
			require.Equal(t, want.Key.Adapter, got.fields["lora_name"])
		}
		extra, ok := got.fields["extra_keys"].([]any)
		require.True(t, ok, "extra_keys is a %T", got.fields["extra_keys"])
		require.Len(t, extra, len(want.Hashes))
		for i, e := range extra {
			var keys []any
			if want.Key.Adapter != "" {
				keys = append(keys, want.Key.Adapter)
			}
			if i == 0 && want.Parent.IsZero() && want.Key.Salt != "" {
				keys = append(keys, want.Key.Salt)
			}
			if keys == nil {
				require.Nil(t, e, "extra keys of block %d", i)
			} else {
				require.Equal(t, keys, e, "extra keys of block %d", i)
			}
		}
	case kv.BlockRemoved:
		checkHashes(t, f, want.Hashes, got.fields["block_hashes"])
		require.Equal(t, f.medium, got.fields["medium"])
	case kv.AllBlocksCleared:
		require.Empty(t, got.fields)
	}
}

func checkHashes(t *testing.T, f form, want []kv.Hash, got any) {
	t.Helper()
	hs, ok := got.([]any)
	require.True(t, ok, "block_hashes is a %T", got)
	require.Len(t, hs, len(want))
	for i := range hs {
		checkHash(t, f, want[i], hs[i])
	}
}

func checkHash(t *testing.T, f form, want kv.Hash, got any) {
	t.Helper()
	if f.hashes == events.ByteHashes {
		require.Equal(t, want.AppendBytes(nil), got, "hash as bytes")
		return
	}
	require.Equal(t, want.Uint64(), unsigned(t, got), "hash as uint64")
}

// copyEvent copies a kv.Event, which the manager reuses.
func copyEvent(ev *kv.Event) kv.Event {
	c := *ev
	c.Hashes = append([]kv.Hash(nil), ev.Hashes...)
	c.Tokens = append([]uint32(nil), ev.Tokens...)
	return c // Key and Medium are strings: immutable
}

// hashes returns n distinct hashes.
func hashes(t testing.TB, n int) []kv.Hash {
	t.Helper()
	h, err := kv.NewHasher(kv.SHA256CBOR, "test")
	require.NoError(t, err)
	tokens := make([]uint32, n)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	return h.AppendHashes(nil, tokens, 1, kv.Key{})
}

func (b wireBatch) String() string {
	return fmt.Sprintf("batch ts=%v rank=%v %d events", b.ts, b.rank, len(b.events))
}
