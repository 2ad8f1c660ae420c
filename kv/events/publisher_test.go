package events_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/pool"
)

const loopback = "tcp://127.0.0.1:0"

func newPublisher(t *testing.T, opts ...events.Option) *events.Publisher {
	t.Helper()
	p, err := events.New(loopback, opts...)
	require.NoError(t, err)
	return p
}

// A scripted admission / eviction / reset sequence through a real manager:
// a router decodes every field of every event, and the sequence numbers
// count the batches from 0 without a gap.
func TestWire(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []events.Option
		form form
		rank uint64
	}{
		{"default", nil, form{events.Uint64Hashes, "GPU"}, 0},
		{"named/bytes/no-medium", []events.Option{
			events.WithEncoding(events.Named), events.WithHashes(events.ByteHashes), events.WithMedium(""),
		}, form{events.ByteHashes, nil}, 0},
		{"positional/bytes/rank", []events.Option{
			events.WithHashes(events.ByteHashes), events.WithDataParallelRank(3),
		}, form{events.ByteHashes, "GPU"}, 3},
		{"named/uint64/cpu", []events.Option{
			events.WithEncoding(events.Named), events.WithMedium("CPU"),
		}, form{events.Uint64Hashes, "CPU"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := events.Topic("pod-1", "llama")
			opts := append([]events.Option{
				events.WithTopic(topic), events.WithFlushInterval(time.Hour), events.WithBatchSize(1000),
			}, c.opts...)
			pub := newPublisher(t, opts...)
			sub := subscribe(t, pub, "kv@")

			p, err := locus.Default(locus.WithBlocks(8))
			require.NoError(t, err)
			defer p.Close()
			var sent []kv.Event
			forward := pub.Subscriber()
			m, err := kv.New(p, kv.WithSubscriber(func(ev *kv.Event) {
				sent = append(sent, copyEvent(ev))
				forward(ev)
			}))
			require.NoError(t, err)
			hasher := m.Hasher()

			keyA := kv.Key{Adapter: "lora-a", Salt: "tenant-1"}
			promptA := seq(1000, 50) // 3 full blocks and a partial one
			promptB := seq(2000, 7*16+1)
			start := time.Now()
			var want [][]kv.Event // the events of each batch
			step := func(do func()) {
				before := len(sent)
				do()
				pub.Flush() // one batch per step, as vLLM publishes
				if len(sent) > before {
					want = append(want, sent[before:])
				}
			}
			var a, b kv.SeqID
			step(func() { a, _, err = m.Admit(promptA, keyA); require.NoError(t, err) })
			step(func() { require.NoError(t, m.Append(a, seq(1050, 14))) }) // fills the fourth block
			step(func() { require.NoError(t, m.Release(a)) })               // cached: no event
			step(func() { b, _, err = m.Admit(promptB, kv.Key{}); require.NoError(t, err) })
			step(func() {
				require.NoError(t, m.Release(b))
				_, err := m.Reset()
				require.NoError(t, err)
			})
			require.NoError(t, m.Close())

			// The manager's events, against hashes computed apart from it.
			fullA := hasher.AppendHashes(nil, append(promptA, seq(1050, 14)...), 16, keyA)
			fullB := hasher.AppendHashes(nil, promptB, 16, kv.Key{})
			require.Len(t, want, 4)
			require.Equal(t, []kv.Event{{Kind: kv.BlockStored, Hashes: fullA[:3], Tokens: promptA[:48], BlockSize: 16, Key: keyA}}, want[0])
			require.Equal(t, []kv.Event{{Kind: kv.BlockStored, Hashes: fullA[3:], Parent: fullA[2], Tokens: seq(1048, 16), BlockSize: 16, Key: keyA}}, want[1])
			require.Len(t, want[2], 2)
			require.Equal(t, kv.BlockRemoved, want[2][0].Kind)
			require.ElementsMatch(t, fullA, want[2][0].Hashes, "the eviction takes every cached block of A")
			require.Equal(t, kv.Event{Kind: kv.BlockStored, Hashes: fullB, Tokens: promptB[:112], BlockSize: 16}, want[2][1])
			require.Equal(t, []kv.Event{{Kind: kv.AllBlocksCleared, BlockSize: 16}}, want[3])

			// What the router decodes.
			for i, evs := range want {
				gotTopic, gotSeq, batch := sub.next(t)
				require.Equal(t, topic, gotTopic)
				require.Equal(t, uint64(i), gotSeq, "sequence numbers count the batches")
				require.GreaterOrEqual(t, batch.ts, float64(start.UnixNano())/1e9-1e-6)
				require.LessOrEqual(t, batch.ts, float64(time.Now().UnixNano())/1e9+1e-6)
				require.Equal(t, c.rank, unsigned(t, batch.rank))
				require.Len(t, batch.events, len(evs))
				for j := range evs {
					checkEvent(t, c.form, evs[j], batch.events[j])
				}
			}
			require.NoError(t, pub.Close())
			st := pub.Snapshot()
			require.Equal(t, events.Stats{Events: 5, Batches: 4, Published: 4, PublishedEvents: 5, Delivered: 4, Joined: 1}, st)
		})
	}
}

// A publisher that has fallen behind drops whole batches, never waits, and
// counts what it dropped; the dropped batches leave a gap in the sequence
// numbers, and Close reports them.
func TestDropsWhenBehind(t *testing.T) {
	hold := make(chan struct{})
	pub := newPublisher(t, events.WithBatchSize(1), events.WithBuffer(2), events.WithHold(hold),
		events.WithFlushInterval(time.Hour))
	sub := subscribe(t, pub, "")
	record := pub.Subscriber()
	hs := hashes(t, 7)
	for i := range 6 {
		record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]})
	}
	st := pub.Snapshot()
	require.Equal(t, events.Stats{Events: 6, Batches: 6, Dropped: 4, DroppedEvents: 4, Queued: 2, Subscribers: 1, Joined: 1}, st)
	close(hold)
	for i := range 2 {
		_, s, b := sub.next(t)
		require.Equal(t, uint64(i), s)
		checkEvent(t, form{events.Uint64Hashes, "GPU"}, kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]}, b.events[0])
	}
	record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[6:7]})
	_, s, b := sub.next(t)
	require.Equal(t, uint64(6), s, "the four dropped batches are a gap of four")
	checkEvent(t, form{events.Uint64Hashes, "GPU"}, kv.Event{Kind: kv.BlockRemoved, Hashes: hs[6:7]}, b.events[0])

	err := pub.Close()
	require.ErrorIs(t, err, events.ErrDropped)
	var dropped *events.DroppedError
	require.ErrorAs(t, err, &dropped)
	require.Equal(t, uint64(4), dropped.Batches)
	require.Equal(t, uint64(4), dropped.Events)
	require.Equal(t, events.Stats{Events: 7, Batches: 7, Published: 3, PublishedEvents: 3, Dropped: 4, DroppedEvents: 4, Delivered: 3, Joined: 1}, pub.Snapshot())
	sub.none(t, 50*time.Millisecond)
}

// The owner's hand-off neither waits nor allocates, even when every batch
// is dropped.
func TestOwnerNeverWaits(t *testing.T) {
	hold := make(chan struct{})
	pub := newPublisher(t, events.WithBatchSize(10), events.WithBuffer(4), events.WithHold(hold))
	record := pub.Subscriber()
	hs := hashes(t, 8)
	tokens := seq(0, 8*16)
	ev := &kv.Event{Kind: kv.BlockStored, Hashes: hs, Tokens: tokens, BlockSize: 16, Key: kv.Key{Adapter: "a"}}
	total := 1000
	for range total { // grow every buffer
		record(ev)
	}
	if !race.Enabled {
		require.Zero(t, testing.AllocsPerRun(10000, func() { record(ev) }))
		total += 10001
	}
	st := pub.Snapshot()
	require.Equal(t, st.Batches-4, st.Dropped)
	require.Equal(t, 4, st.Queued)
	close(hold)
	err := pub.Close()
	require.ErrorIs(t, err, events.ErrDropped)
	st = pub.Snapshot()
	partial := uint64(min(total%10, 1))
	require.Equal(t, 4+partial, st.Published, "the four queued and the last partial one")
	require.Equal(t, st.Batches, st.Published+st.Dropped)
	require.Equal(t, st.Events, st.PublishedEvents+st.DroppedEvents)
}

// Close publishes the batch being filled.
func TestCloseFlushes(t *testing.T) {
	pub := newPublisher(t, events.WithFlushInterval(time.Hour), events.WithLinger(time.Second))
	sub := subscribe(t, pub, "")
	record := pub.Subscriber()
	hs := hashes(t, 3)
	for i := range hs {
		record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]})
	}
	sub.none(t, 20*time.Millisecond)
	require.NoError(t, pub.Close())
	_, s, b := sub.next(t)
	require.Zero(t, s)
	require.Len(t, b.events, 3)
	record(&kv.Event{Kind: kv.AllBlocksCleared})
	require.Equal(t, events.Stats{Events: 4, Batches: 1, Published: 1, PublishedEvents: 3, DroppedEvents: 1, Delivered: 1, Joined: 1}, pub.Snapshot())
	require.ErrorIs(t, pub.Close(), pool.ErrClosed)
}

// A batch that is not filled is published after the flush interval.
func TestFlushInterval(t *testing.T) {
	pub := newPublisher(t, events.WithFlushInterval(5*time.Millisecond))
	defer pub.Close()
	sub := subscribe(t, pub, "")
	record := pub.Subscriber()
	record(&kv.Event{Kind: kv.AllBlocksCleared})
	_, s, b := sub.next(t)
	require.Zero(t, s)
	require.Len(t, b.events, 1)
	require.Equal(t, "AllBlocksCleared", b.events[0].tag)
	record(&kv.Event{Kind: kv.AllBlocksCleared})
	_, s, _ = sub.next(t)
	require.Equal(t, uint64(1), s)
}

// The owner fills batches while the flush timer takes them from under it:
// every event arrives once, in order, and the sequence numbers have no gap
// but those of batches counted as dropped.
func TestFlushRacesOwner(t *testing.T) {
	const n = 20000
	pub := newPublisher(t, events.WithFlushInterval(20*time.Microsecond), events.WithBatchSize(7),
		events.WithHighWaterMark(0), events.WithBuffer(64))
	sub := subscribe(t, pub, "")
	record := pub.Subscriber()
	hs := hashes(t, n)
	index := make(map[uint64]int, n)
	for i, h := range hs {
		index[h.Uint64()] = i
	}
	require.Len(t, index, n)
	for i := range n {
		record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]})
		if i%1000 == 0 {
			time.Sleep(time.Millisecond) // let the timer catch batches half full
		}
	}
	pub.Flush()
	st := pub.Snapshot() // every batch is sealed: the drops are final
	got, last, next, gaps := 0, -1, uint64(0), uint64(0)
	for got+int(st.DroppedEvents) < n {
		_, s, b := sub.next(t)
		require.GreaterOrEqual(t, s, next)
		gaps += s - next
		next = s + 1
		for _, ev := range b.events {
			i := index[unsigned(t, ev.fields["block_hashes"].([]any)[0])]
			require.Greater(t, i, last, "events arrive once, in order")
			last = i
			got++
		}
	}
	gaps += st.Batches - next // the batches after the last one received were dropped
	require.Equal(t, st.Dropped, gaps, "the gaps are exactly the dropped batches")
	require.Equal(t, uint64(n), st.Events)
	err := pub.Close()
	if st.Dropped == 0 {
		require.NoError(t, err)
	}
	t.Logf("%d batches, %d dropped", st.Batches, st.Dropped)
}

func seq(from, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(from + i)
	}
	return s
}
