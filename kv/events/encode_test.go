package events_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/pool"
)

// One event of each kind, byte for byte as msgspec encodes vLLM's structs
// with array_like=True: the expected bytes are written out from the
// MessagePack spec, not produced by this package.
func TestPositionalBytes(t *testing.T) {
	h, err := kv.NewHasher(kv.SHA256CBOR, "")
	require.NoError(t, err)
	hs := h.AppendHashes(nil, []uint32{1, 300}, 2, kv.Key{})
	require.GreaterOrEqual(t, hs[0].Uint64(), uint64(1<<32), "the test hash takes the 8-byte form")
	ts := time.Unix(1757500000, 250_000_000)
	msg, err := events.Encode(7, ts, []kv.Event{
		{Kind: kv.BlockStored, Hashes: hs, Tokens: []uint32{1, 300}, BlockSize: 2, Key: kv.Key{Adapter: "ad"}},
		{Kind: kv.BlockRemoved, Hashes: hs},
		{Kind: kv.AllBlocksCleared},
	}, events.WithTopic("kv@p@m"))
	require.NoError(t, err)
	require.Equal(t, []byte("kv@p@m"), msg.Frames[0])
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 7}, msg.Frames[1])

	u64 := func(h kv.Hash) []byte { return binary.BigEndian.AppendUint64([]byte{0xcf}, h.Uint64()) }
	var want []byte
	want = append(want, 0x93)                                           // EventBatch: array of 3
	want = append(want, 0xcb, 0x41, 0xda, 0x30, 0x54, 0x98, 0x10, 0, 0) // ts: float64 1757500000.25
	want = append(want, 0x93)                                           // events: array of 3
	want = append(want, 0x99)                                           // BlockStored: tag and 8 fields
	want = append(want, 0xab)                                           // fixstr of 11
	want = append(want, "BlockStored"...)
	want = append(want, 0x91)
	want = append(want, u64(hs[0])...) // block_hashes (a uint64 this large takes 0xcf)
	want = append(want, 0xc0)          // parent_block_hash: nil
	want = append(want, 0x92, 0x01, 0xcd, 0x01, 0x2c)
	want = append(want, 0x02)                // block_size
	want = append(want, 0xc0)                // lora_id: nil
	want = append(want, 0xa3, 'G', 'P', 'U') // medium
	want = append(want, 0xa2, 'a', 'd')      // lora_name
	want = append(want, 0x91, 0x91, 0xa2, 'a', 'd')
	want = append(want, 0x93, 0xac) // BlockRemoved: tag and 2 fields
	want = append(want, "BlockRemoved"...)
	want = append(want, 0x91)
	want = append(want, u64(hs[0])...)
	want = append(want, 0xa3, 'G', 'P', 'U')
	want = append(want, 0x91, 0xb0) // AllBlocksCleared: the tag alone
	want = append(want, "AllBlocksCleared"...)
	want = append(want, 0x00) // data_parallel_rank
	require.Equal(t, want, msg.Frames[2])
}

// Every option that makes no sense is refused with pool.ErrInvalidConfig.
func TestInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  events.Option
	}{
		{"nil option", nil},
		{"zero batch", events.WithBatchSize(0)},
		{"huge batch", events.WithBatchSize(1 << 30)},
		{"zero interval", events.WithFlushInterval(0)},
		{"negative interval", events.WithFlushInterval(-time.Second)},
		{"zero buffer", events.WithBuffer(0)},
		{"huge buffer", events.WithBuffer(1 << 30)},
		{"negative hwm", events.WithHighWaterMark(-1)},
		{"negative linger", events.WithLinger(-1)},
		{"unknown encoding", events.WithEncoding(9)},
		{"unknown hash form", events.WithHashes(0)},
		{"negative rank", events.WithDataParallelRank(-1)},
		{"topic not UTF-8", events.WithTopic("\xff\xfe")},
		{"huge topic", events.WithTopic(strings.Repeat("k", 4096))},
		{"medium not UTF-8", events.WithMedium("\xff")},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := events.New(loopback, c.opt)
			require.ErrorIs(t, err, pool.ErrInvalidConfig)
			require.Nil(t, p)
		})
	}
	for _, ep := range []string{"", "tcp:/127.0.0.1", "nope://x", "tcp://256.0.0.1:1"} {
		p, err := events.New(ep)
		require.Error(t, err, "endpoint %q", ep)
		require.Nil(t, p)
	}
}

func TestZeroPublisher(t *testing.T) {
	var p events.Publisher
	p.Subscriber()(&kv.Event{Kind: kv.AllBlocksCleared})
	p.Flush()
	require.Nil(t, p.Addr())
	require.Equal(t, events.Stats{Events: 1, DroppedEvents: 1}, p.Snapshot())
	require.ErrorIs(t, p.Close(), pool.ErrClosed)
}

func TestInvalidEvents(t *testing.T) {
	p := newPublisher(t)
	record := p.Subscriber()
	record(nil)
	record(&kv.Event{})
	record(&kv.Event{Kind: kv.AllBlocksCleared + 1})
	require.NoError(t, p.Close())
	require.Equal(t, events.Stats{Invalid: 3}, p.Snapshot())
}

// A publisher that connects to a listening subscriber, as llm-d's indexer
// listens for engines on its own node.
func TestDial(t *testing.T) {
	sub := newSubscriber(t, "")
	require.NoError(t, sub.sock.Listen(loopback))
	pub, err := events.New("tcp://"+sub.sock.Addr().String(), events.WithDial(), events.WithFlushInterval(time.Millisecond))
	require.NoError(t, err)
	require.Nil(t, pub.Addr())
	deadline := time.Now().Add(wait)
	for !events.Subscribed(pub) {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(time.Millisecond)
	}
	pub.Subscriber()(&kv.Event{Kind: kv.AllBlocksCleared})
	_, s, b := sub.next(t)
	require.Zero(t, s)
	require.Equal(t, "AllBlocksCleared", b.events[0].tag)
	require.NoError(t, pub.Close())
}

// FuzzEncode encodes arbitrary events and decodes them as a router does:
// every field must come back.
func FuzzEncode(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint16(5), "", "", false, false)
	f.Add(uint8(1), uint8(1), uint16(16), "lora", "salt", true, true)
	f.Add(uint8(2), uint8(0), uint16(0), "", "x", false, true)
	h, err := kv.NewHasher(kv.SHA256CBOR, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind, nblocks uint8, blockSize uint16, adapter, salt string, withParent, named bool) {
		bs := int(blockSize%64) + 1
		tokens := seq(int(blockSize), int(nblocks)*bs)
		hs := h.AppendHashes(nil, append(seq(7, bs), tokens...), bs, kv.Key{Adapter: adapter, Salt: salt})
		ev := kv.Event{Kind: kv.EventKind(kind%3) + kv.BlockStored, BlockSize: bs, Key: kv.Key{Adapter: adapter, Salt: salt}}
		switch ev.Kind {
		case kv.BlockStored:
			ev.Hashes, ev.Tokens = hs[1:], tokens
			if withParent {
				ev.Parent = hs[0]
			}
		case kv.BlockRemoved:
			ev.Hashes = hs
		}
		enc := events.Positional
		if named {
			enc = events.Named
		}
		for _, fm := range []form{{events.Uint64Hashes, "GPU"}, {events.ByteHashes, "GPU"}} {
			msg, err := events.Encode(uint64(kind), time.Unix(1, 0), []kv.Event{ev}, events.WithEncoding(enc), events.WithHashes(fm.hashes))
			require.NoError(t, err)
			_, s, b := decodeMessage(t, msg)
			require.Equal(t, uint64(kind), s)
			require.Equal(t, 1.0, b.ts)
			require.Len(t, b.events, 1)
			checkEvent(t, fm, ev, b.events[0])
		}
	})
}
