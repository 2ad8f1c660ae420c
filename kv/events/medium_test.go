package events_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/transport/mailbox"
)

// A batch of hot-pool and tier events, in every encoding and hash form,
// with and without a publisher medium: each event carries its own medium
// (a tier's), or the publisher's (the hot pool's), and every other field
// as the hot pool's events do.
func TestPerEventMedium(t *testing.T) {
	h, err := kv.NewHasher(kv.SHA256CBOR, "")
	require.NoError(t, err)
	key := kv.Key{Adapter: "lora-a", Salt: "tenant-1"}
	toks := make([]uint32, 48)
	for i := range toks {
		toks[i] = uint32(i * 7)
	}
	hs := h.AppendHashes(nil, toks, 16, key)
	gpu := []kv.Event{
		{Kind: kv.BlockStored, Hashes: hs[:2], Tokens: toks[:32], BlockSize: 16, Key: key},
		{Kind: kv.BlockStored, Hashes: hs[2:], Parent: hs[1], Tokens: toks[32:], BlockSize: 16, Key: key},
	}
	var evs []kv.Event
	evs = append(evs, gpu...)
	for _, ev := range gpu {
		ev.Medium = "CPU"
		evs = append(evs, ev)
	}
	evs = append(evs,
		kv.Event{Kind: kv.BlockStored, Hashes: hs[:1], BlockSize: 16, Medium: "DISK"}, // a placeholder
		kv.Event{Kind: kv.BlockRemoved, Hashes: hs[1:], BlockSize: 16, Medium: "CPU"},
		kv.Event{Kind: kv.BlockRemoved, Hashes: hs, BlockSize: 16},
		kv.Event{Kind: kv.BlockRemoved, Hashes: hs[:1], BlockSize: 16, Medium: "SHARED_STORAGE"},
		kv.Event{Kind: kv.AllBlocksCleared, BlockSize: 16},
	)
	for _, c := range []struct {
		name string
		opts []events.Option
		form form
	}{
		{"positional/uint64", nil, form{events.Uint64Hashes, "GPU"}},
		{"positional/bytes", []events.Option{events.WithHashes(events.ByteHashes)}, form{events.ByteHashes, "GPU"}},
		{"named/uint64", []events.Option{events.WithEncoding(events.Named)}, form{events.Uint64Hashes, "GPU"}},
		{"named/bytes/no-medium", []events.Option{
			events.WithEncoding(events.Named), events.WithHashes(events.ByteHashes), events.WithMedium(""),
		}, form{events.ByteHashes, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, err := events.Encode(3, time.Unix(1757500000, 0), evs, c.opts...)
			require.NoError(t, err)
			_, seq, b := decodeMessage(t, msg)
			require.Equal(t, uint64(3), seq)
			require.Len(t, b.events, len(evs))
			for i := range evs {
				checkEvent(t, c.form, evs[i], b.events[i])
			}
			// The medium as a router reads it, spelled out.
			mediums := []any{c.form.medium, c.form.medium, "CPU", "CPU", "DISK", "CPU", c.form.medium, "SHARED_STORAGE"}
			for i, m := range mediums {
				require.Equal(t, m, b.events[i].fields["medium"], "event %d", i)
			}
		})
	}
}

// A tier's BlockRemoved, byte for byte: the medium is the event's.
func TestPerEventMediumBytes(t *testing.T) {
	h, err := kv.NewHasher(kv.SHA256CBOR, "")
	require.NoError(t, err)
	hs := h.AppendHashes(nil, []uint32{1, 300}, 2, kv.Key{})
	msg, err := events.Encode(0, time.Unix(0, 0), []kv.Event{{Kind: kv.BlockRemoved, Hashes: hs, Medium: "CPU"}})
	require.NoError(t, err)
	want := []byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x93, 0xac}
	want = append(want, "BlockRemoved"...)
	want = append(want, 0x91, 0xcf)
	want = binary.BigEndian.AppendUint64(want, hs[0].Uint64())
	want = append(want, 0xa3, 'C', 'P', 'U', 0x00)
	require.Equal(t, want, msg.Frames[2])
}

// A manager writing through to a host tier, over a real socket: the router
// decodes the hot pool's BlockStored with the publisher's medium, then the
// host tier's, self-describing, with medium CPU, then the host tier's
// removals after its Reset.
func TestTierEventsOverTheWire(t *testing.T) {
	const bs = 16
	pub := newPublisher(t, events.WithFlushInterval(time.Hour), events.WithBatchSize(1000))
	sub := subscribe(t, pub, "")
	st, err := host.New(64, 8, host.WithHeap())
	require.NoError(t, err)
	ht, err := tier.New(st, tier.WithWorkers(1))
	require.NoError(t, err)
	defer ht.Close()
	p := newTierPool(t, 8, 64)
	var sent []kv.Event
	forward := pub.Subscriber()
	m, err := kv.New(p, kv.WithTiers(ht), kv.WithSubscriber(func(ev *kv.Event) {
		sent = append(sent, copyEvent(ev))
		forward(ev)
	}))
	require.NoError(t, err)
	key := kv.Key{Adapter: "lora-a"}
	prompt := seq(100, 2*bs+1)
	id, _, err := m.Admit(prompt, key)
	require.NoError(t, err)
	require.NoError(t, m.Release(id))
	deadline := time.Now().Add(wait)
	for m.Stats().InFlight > 0 || m.Stats().Tiers[0].StoredBlocks == 0 {
		_, err := m.Drain()
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "stores never completed")
		time.Sleep(100 * time.Microsecond)
	}
	require.NoError(t, ht.Reset())
	_, err = m.Drain()
	require.NoError(t, err)
	require.NoError(t, m.Close())
	pub.Flush()

	require.Len(t, sent, 3)
	require.Equal(t, "", sent[0].Medium)
	want := sent[0]
	want.Medium = "CPU"
	require.Equal(t, want, sent[1])
	require.Equal(t, kv.BlockRemoved, sent[2].Kind)
	require.Equal(t, "CPU", sent[2].Medium)
	require.ElementsMatch(t, sent[0].Hashes, sent[2].Hashes)

	_, _, b := sub.next(t)
	require.Len(t, b.events, 3)
	for i := range sent {
		checkEvent(t, form{events.Uint64Hashes, "GPU"}, sent[i], b.events[i])
	}
	require.Equal(t, "GPU", b.events[0].fields["medium"])
	require.Equal(t, "CPU", b.events[1].fields["medium"])
	require.Equal(t, b.events[0].fields["token_ids"], b.events[1].fields["token_ids"])
	require.Equal(t, b.events[0].fields["block_hashes"], b.events[1].fields["block_hashes"])
	require.NoError(t, pub.Close())
}

// newTierPool returns a heap pool of n blocks of size bytes, closed when
// the test ends.
func newTierPool(t *testing.T, n, size int) *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy] {
	t.Helper()
	b, err := heap.New(size, n)
	require.NoError(t, err)
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}
