package events_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tinylib/msgp/msgp"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
)

// decodeEvents returns events that use every field the encoder writes, of
// every kind: first blocks with and without adapter and salt, a later block
// (its salt is not sent), a tier's placeholder, media of the hot pool and
// of tiers.
func decodeEvents(t testing.TB, algo kv.HashAlgo) []kv.Event {
	h, err := kv.NewHasher(algo, "")
	require.NoError(t, err)
	toks := func(base uint32, n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = base + uint32(i)*7919
		}
		return out
	}
	tk := toks(1<<31, 8) // ids past int32
	a := h.Block(kv.Hash{}, tk[:4], kv.Key{Adapter: "sql", Salt: "tenant-1"})
	b := h.Block(a, tk[4:], kv.Key{Adapter: "sql"})
	c := h.Block(b, toks(3, 4), kv.Key{Adapter: "sql"})
	d := h.Block(kv.Hash{}, toks(9, 4), kv.Key{Salt: "s"})
	e := h.Block(kv.Hash{}, toks(11, 4), kv.Key{})
	return []kv.Event{
		{Kind: kv.BlockStored, Hashes: []kv.Hash{a, b}, Tokens: tk, BlockSize: 4, Key: kv.Key{Adapter: "sql", Salt: "tenant-1"}},
		{Kind: kv.BlockStored, Hashes: []kv.Hash{c}, Parent: b, Tokens: toks(3, 4), BlockSize: 4, Key: kv.Key{Adapter: "sql", Salt: "tenant-1"}},
		{Kind: kv.BlockStored, Hashes: []kv.Hash{d}, Tokens: toks(9, 4), BlockSize: 4, Key: kv.Key{Salt: "s"}, Medium: "CPU"},
		{Kind: kv.BlockStored, Hashes: []kv.Hash{e}, Tokens: toks(11, 4), BlockSize: 4},
		{Kind: kv.BlockStored, Hashes: []kv.Hash{a, b}, BlockSize: 4, Medium: "DISK"}, // a placeholder
		{Kind: kv.BlockRemoved, Hashes: []kv.Hash{c, b}},
		{Kind: kv.BlockRemoved, Hashes: []kv.Hash{d}, Medium: "CPU"},
		{Kind: kv.BlockRemoved},
		{Kind: kv.AllBlocksCleared},
		{Kind: kv.BlockStored, Hashes: []kv.Hash{}, BlockSize: 4},
	}
}

// wantDecoded is what Decode must return for ev sent with medium as the
// publisher's WithMedium: every field, the salt only where it is sent.
func checkDecoded(t *testing.T, want kv.Event, got events.Event, medium string, form events.HashForm) {
	t.Helper()
	require.Equal(t, want.Kind, got.Kind)
	require.Len(t, got.Hashes, len(want.Hashes))
	for i, h := range want.Hashes {
		require.True(t, got.Hashes[i].Matches(h), "hash %d: %v, want %v", i, got.Hashes[i], h)
		require.Equal(t, events.WireHashOf(h, form), got.Hashes[i])
		require.Equal(t, h.Uint64(), got.Hashes[i].Uint64())
		require.Equal(t, form == events.Uint64Hashes, got.Hashes[i].IsInteger())
	}
	wantMedium := want.Medium
	if wantMedium == "" {
		wantMedium = medium
	}
	if want.Kind == kv.AllBlocksCleared {
		wantMedium = ""
	}
	require.Equal(t, wantMedium, got.Medium)
	if want.Kind != kv.BlockStored {
		require.True(t, got.Parent.IsZero())
		require.Empty(t, got.Tokens)
		require.Zero(t, got.Key)
		return
	}
	require.Equal(t, events.WireHashOf(want.Parent, form), got.Parent)
	require.Equal(t, want.Parent.IsZero(), got.Parent.IsZero())
	if len(want.Tokens) == 0 {
		require.Empty(t, got.Tokens)
	} else {
		require.Equal(t, want.Tokens, got.Tokens)
	}
	require.Equal(t, want.BlockSize, got.BlockSize)
	key := want.Key
	if !want.Parent.IsZero() || len(want.Hashes) == 0 {
		key.Salt = "" // sent with a sequence's first block only
	}
	require.Equal(t, key, got.Key)
	require.Zero(t, got.LoRAID)
}

func TestDecodeRoundTrip(t *testing.T) {
	ts := time.Unix(1_700_000_000, 250_000_000)
	for _, algo := range []kv.HashAlgo{kv.SHA256CBOR, kv.XXH3CBOR} {
		evs := decodeEvents(t, algo)
		for _, enc := range []events.Encoding{events.Positional, events.Named} {
			for _, form := range []events.HashForm{events.Uint64Hashes, events.ByteHashes} {
				for _, medium := range []string{"GPU", ""} {
					t.Run(fmt.Sprintf("%v/%v/%v/medium=%q", algo, enc, form, medium), func(t *testing.T) {
						msg, err := events.Encode(41, ts, evs, events.WithEncoding(enc), events.WithHashes(form),
							events.WithMedium(medium), events.WithDataParallelRank(3), events.WithTopic("kv@p@m"))
						require.NoError(t, err)
						var b events.Batch
						require.NoError(t, events.DecodeMessage(msg.Frames, &b))
						require.Equal(t, "kv@p@m", b.Topic)
						require.Equal(t, uint64(41), b.Seq)
						require.Equal(t, 3, b.Rank)
						require.InDelta(t, 0, b.Timestamp.Sub(ts).Seconds(), 1e-6)
						require.Len(t, b.Events, len(evs))
						for i := range evs {
							checkDecoded(t, evs[i], b.Events[i], medium, form)
						}
						// The batch is reused: a second decode gives the same.
						require.NoError(t, events.Decode(msg.Frames[2], &b))
						require.Len(t, b.Events, len(evs))
						checkDecoded(t, evs[0], b.Events[0], medium, form)
					})
				}
			}
		}
	}
}

// TestDecodeTruncated: every prefix of a valid payload, and every byte
// flipped, fails with ErrMalformed or decodes; nothing panics.
func TestDecodeTruncated(t *testing.T) {
	for _, enc := range []events.Encoding{events.Positional, events.Named} {
		msg, err := events.Encode(1, time.Now(), decodeEvents(t, kv.SHA256CBOR), events.WithEncoding(enc))
		require.NoError(t, err)
		p := msg.Frames[2]
		var b events.Batch
		for n := range len(p) {
			err := events.Decode(p[:n], &b)
			require.ErrorIs(t, err, events.ErrMalformed, "prefix of %d bytes", n)
			require.Empty(t, b.Events)
		}
		q := append([]byte(nil), p...)
		for i := range q {
			q[i] ^= 0xff
			if err := events.Decode(q, &b); err != nil {
				require.ErrorIs(t, err, events.ErrMalformed)
			}
			q[i] ^= 0xff
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	arr := msgp.AppendArrayHeader
	str := msgp.AppendString
	batch := func(events ...func([]byte) []byte) []byte {
		b := msgp.AppendFloat64(arr(nil, 3), 1)
		b = arr(b, uint32(len(events)))
		for _, e := range events {
			b = e(b)
		}
		return msgp.AppendUint64(b, 0)
	}
	hostileCount := func(lead byte) []byte { // an array header of 2^32-1 elements and nothing after it
		return binary.BigEndian.AppendUint32([]byte{lead}, 0xffffffff)
	}
	cases := map[string][]byte{
		"empty":       nil,
		"not a batch": msgp.AppendString(nil, "x"),
		"4 elements":  msgp.AppendNil(msgp.AppendNil(msgp.AppendNil(msgp.AppendNil(arr(nil, 4))))),
		"trailing":    append(batch(), 0xc0),
		"huge events": append(msgp.AppendFloat64(arr(nil, 3), 1), hostileCount(0xdd)...),
		"unknown tag": batch(func(b []byte) []byte { return str(arr(b, 1), "BlockMoved") }),
		"short stored": batch(func(b []byte) []byte {
			return msgp.AppendNil(arr(str(arr(b, 3), "BlockStored"), 0))
		}),
		"huge hashes": batch(func(b []byte) []byte {
			return append(str(arr(b, 3), "BlockRemoved"), hostileCount(0xdd)...)
		}),
		"short hash": batch(func(b []byte) []byte {
			return msgp.AppendNil(msgp.AppendBytes(arr(str(arr(b, 3), "BlockRemoved"), 1), []byte{1, 2}))
		}),
		"negative hash": batch(func(b []byte) []byte {
			return msgp.AppendNil(msgp.AppendInt64(arr(str(arr(b, 3), "BlockRemoved"), 1), -1))
		}),
		"string hash": batch(func(b []byte) []byte {
			return msgp.AppendNil(str(arr(str(arr(b, 3), "BlockRemoved"), 1), "abcdefgh"))
		}),
		"token past uint32": batch(func(b []byte) []byte {
			b = str(arr(b, 5), "BlockStored")
			b = msgp.AppendUint64(arr(b, 1), 7)
			b = msgp.AppendNil(b)
			b = msgp.AppendUint64(arr(b, 1), 1<<32)
			return msgp.AppendUint64(b, 1)
		}),
		"tokens not blocks": batch(func(b []byte) []byte {
			b = str(arr(b, 5), "BlockStored")
			b = msgp.AppendUint64(arr(b, 1), 7)
			b = msgp.AppendNil(b)
			b = msgp.AppendUint64(msgp.AppendUint64(arr(b, 2), 1), 2)
			return msgp.AppendUint64(b, 4)
		}),
		"named without type": batch(func(b []byte) []byte {
			return msgp.AppendNil(str(msgp.AppendMapHeader(b, 1), "block_hashes"))
		}),
		"named twice": batch(func(b []byte) []byte {
			b = str(str(msgp.AppendMapHeader(b, 3), "type"), "BlockRemoved")
			b = arr(str(b, "block_hashes"), 0)
			return arr(str(b, "block_hashes"), 0)
		}),
		"named missing": batch(func(b []byte) []byte {
			return msgp.AppendNil(str(str(str(msgp.AppendMapHeader(b, 2), "type"), "BlockRemoved"), "medium"))
		}),
		"deep": batch(func(b []byte) []byte {
			b = str(arr(b, 3), "BlockRemoved")
			b = arr(b, 0)
			for range 10000 {
				b = arr(b, 1)
			}
			return b
		}),
		"negative rank": msgp.AppendInt64(arr(msgp.AppendFloat64(arr(nil, 3), 1), 0), -1),
		"nan ts":        msgp.AppendNil(arr(msgp.AppendFloat64(arr(nil, 3), nan()), 0)),
	}
	for name, p := range cases {
		var b events.Batch
		err := events.Decode(p, &b)
		require.ErrorIs(t, err, events.ErrMalformed, name)
		require.Empty(t, b.Events, name)
	}
	require.ErrorIs(t, events.Decode(batch(), nil), events.ErrMalformed)
	require.ErrorIs(t, events.DecodeMessage([][]byte{nil, nil}, &events.Batch{}), events.ErrMalformed)
	require.ErrorIs(t, events.DecodeMessage([][]byte{nil, {1}, batch()}, &events.Batch{}), events.ErrMalformed)

	// Leniencies: vLLM's older batches and events.
	var b events.Batch
	old := msgp.AppendFloat64(arr(nil, 2), 1)
	old = arr(old, 1)
	old = msgp.AppendUint64(arr(str(arr(old, 2), "BlockRemoved"), 1), 9)
	require.NoError(t, events.Decode(old, &b))
	require.Equal(t, uint64(9), b.Events[0].Hashes[0].Uint64())
	require.Empty(t, b.Events[0].Medium)
	named := msgp.AppendFloat64(arr(nil, 3), 1)
	named = str(str(msgp.AppendMapHeader(arr(named, 1), 3), "type"), "BlockRemoved")
	named = msgp.AppendUint64(str(named, "future_field"), 1)
	named = msgp.AppendUint64(arr(str(named, "block_hashes"), 1), 5)
	named = msgp.AppendNil(named)
	require.NoError(t, events.Decode(named, &b))
	require.Equal(t, uint64(5), b.Events[0].Hashes[0].Uint64())
}

func nan() float64 { var z float64; return z / z }

// TestDecodeAllocs: decoding into a reused Batch allocates only the
// strings that are not the usual media.
func TestDecodeAllocs(t *testing.T) {
	evs := decodeEvents(t, kv.SHA256CBOR)[3:] // no adapter or salt
	msg, err := events.Encode(1, time.Now(), evs)
	require.NoError(t, err)
	var b events.Batch
	require.NoError(t, events.Decode(msg.Frames[2], &b))
	allocs := testing.AllocsPerRun(100, func() {
		if err := events.Decode(msg.Frames[2], &b); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func TestWireHashZero(t *testing.T) {
	var w events.WireHash
	require.True(t, w.IsZero())
	require.Zero(t, w.Uint64())
	require.Empty(t, w.String())
	require.True(t, w.Matches(kv.Hash{})) // a nil parent is the zero parent
	require.Equal(t, w, events.WireHashOf(kv.Hash{}, events.ByteHashes))
	require.Empty(t, w.AppendBytes(nil))
}

func FuzzDecode(f *testing.F) {
	for _, enc := range []events.Encoding{events.Positional, events.Named} {
		for _, form := range []events.HashForm{events.Uint64Hashes, events.ByteHashes} {
			msg, err := events.Encode(1, time.Unix(1, 0), decodeEvents(f, kv.SHA256CBOR), events.WithEncoding(enc), events.WithHashes(form))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(msg.Frames[2])
		}
	}
	f.Add([]byte{0x93, 0x01, 0x90, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		var b events.Batch
		err := events.Decode(p, &b)
		if err != nil {
			if !errors.Is(err, events.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			if len(b.Events) != 0 {
				t.Fatalf("%d events after an error", len(b.Events))
			}
			return
		}
		if len(b.Events) > len(p) {
			t.Fatalf("%d events from %d bytes", len(b.Events), len(p))
		}
		for _, ev := range b.Events {
			if ev.Kind < kv.BlockStored || ev.Kind > kv.AllBlocksCleared {
				t.Fatalf("kind %v", ev.Kind)
			}
			if len(ev.Tokens) != 0 && len(ev.Tokens) != ev.BlockSize*len(ev.Hashes) {
				t.Fatalf("%d tokens for %d blocks of %d", len(ev.Tokens), len(ev.Hashes), ev.BlockSize)
			}
		}
	})
}
