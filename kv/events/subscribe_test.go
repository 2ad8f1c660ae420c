package events_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/pool"
)

// received is what a subscription's function got.
type received struct {
	mu      sync.Mutex
	seqs    []uint64
	first   []uint64 // the first hash of each batch's first event
	flags   []string
	missed  uint64
	batches int
}

func (r *received) fn(b *events.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seqs = append(r.seqs, b.Seq)
	var h uint64
	if len(b.Events) > 0 && len(b.Events[0].Hashes) > 0 {
		h = b.Events[0].Hashes[0].Uint64()
	}
	r.first = append(r.first, h)
	f := ""
	if b.Replayed {
		f += "R"
	}
	if b.Restarted {
		f += "S"
	}
	r.flags = append(r.flags, f)
	r.missed += b.Missed
	r.batches++
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches
}

func (r *received) wait(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "batches", func() bool { return r.count() >= n })
}

// publishOne publishes one batch of one BlockStored event and waits until
// it is written to the socket.
func publishOne(t *testing.T, p *events.Publisher, h kv.Hash) {
	t.Helper()
	before := p.Snapshot().Published
	p.Subscriber()(&kv.Event{Kind: kv.BlockStored, Hashes: []kv.Hash{h}, Tokens: []uint32{1, 2}, BlockSize: 2})
	p.Flush()
	waitFor(t, "publish", func() bool { return p.Snapshot().Published > before })
}

func subHashes(t *testing.T, n int) []kv.Hash {
	h, err := kv.NewHasher(kv.SHA256CBOR, "")
	require.NoError(t, err)
	out := make([]kv.Hash, n)
	for i := range out {
		out[i] = h.Block(kv.Hash{}, []uint32{uint32(i)}, kv.Key{})
	}
	return out
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func TestSubscribeLateJoinAndGap(t *testing.T) {
	topic := events.Topic("pod-a", "m")
	pub, err := events.New("tcp://127.0.0.1:0", events.WithTopic(topic), events.WithReplay("tcp://127.0.0.1:0"))
	require.NoError(t, err)
	defer pub.Close()
	hs := subHashes(t, 9)
	for i := range 3 { // before any subscriber: lost but to the replay
		publishOne(t, pub, hs[i])
	}
	var r received
	hold := make(chan struct{})
	sub, err := events.Subscribe(context.Background(), "tcp://"+pub.Addr().String(), r.fn, events.WithRedialHold(hold),
		events.WithPrefix("kv@pod-a@"), events.WithReplayFrom("tcp://"+pub.ReplayAddr().String()))
	require.NoError(t, err)
	defer sub.Close()
	waitSubscribers(t, pub, 1)
	publishOne(t, pub, hs[3])
	r.wait(t, 4)

	// The connection fails; what is published meanwhile comes back by
	// replay once the next live batch shows the gap.
	events.DropConnection(sub)
	waitFor(t, "disconnect", func() bool { return pub.Snapshot().Left == 1 })
	for i := 4; i < 7; i++ {
		publishOne(t, pub, hs[i])
	}
	close(hold)
	waitSubscribers(t, pub, 1)
	for i := 7; i < 9; i++ {
		publishOne(t, pub, hs[i])
	}
	r.wait(t, 9)
	r.mu.Lock()
	require.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8}, r.seqs)
	for i, h := range hs {
		require.Equal(t, h.Uint64(), r.first[i], "batch %d", i)
	}
	require.Equal(t, []string{"R", "R", "R", "", "R", "R", "R", "", ""}, r.flags)
	require.Zero(t, r.missed)
	r.mu.Unlock()
	st := sub.Stats()
	require.Equal(t, uint64(9), st.Batches)
	require.Equal(t, uint64(6), st.Replayed)
	require.Equal(t, uint64(2), st.Gaps)
	require.Equal(t, uint64(2), st.Connects)
	require.Equal(t, uint64(9), st.Next)
	require.Zero(t, st.Missed+st.Malformed+st.ReplayFailures+st.Restarts)
	require.NoError(t, sub.Close())
	require.ErrorIs(t, sub.Close(), pool.ErrClosed)
}

// TestSubscribeRestartedPublisher: a publisher killed and started again on
// the same endpoint starts a new stream from 0; the subscription reconnects
// and marks it. Without a replay socket a gap is counted missed.
func TestSubscribeRestartedPublisher(t *testing.T) {
	addr := freePort(t)
	hs := subHashes(t, 6)
	pub, err := events.New("tcp://" + addr)
	require.NoError(t, err)
	var r received
	hold := make(chan struct{})
	sub, err := events.Subscribe(context.Background(), "tcp://"+addr, r.fn, events.WithRedial(20*time.Millisecond), events.WithRedialHold(hold))
	require.NoError(t, err)
	defer sub.Close()
	waitSubscribers(t, pub, 1)
	publishOne(t, pub, hs[0])
	publishOne(t, pub, hs[1])
	r.wait(t, 2)
	require.NoError(t, pub.Close())
	hold <- struct{}{} // let it connect again, once

	pub, err = events.New("tcp://" + addr)
	require.NoError(t, err)
	defer pub.Close()
	waitSubscribers(t, pub, 1)
	publishOne(t, pub, hs[2]) // seq 0 of the new stream
	r.wait(t, 3)
	// A gap without a replay socket: seq 1 is lost.
	joined := pub.Snapshot().Joined
	events.DropConnection(sub)
	waitFor(t, "disconnect", func() bool { return pub.Snapshot().Left >= 1 })
	publishOne(t, pub, hs[3])
	hold <- struct{}{}
	waitFor(t, "reconnect", func() bool { return pub.Snapshot().Joined > joined })
	waitSubscribers(t, pub, 1)
	publishOne(t, pub, hs[4])
	r.wait(t, 4)
	r.mu.Lock()
	require.Equal(t, []uint64{0, 1, 0, 2}, r.seqs)
	require.Equal(t, []string{"", "", "S", ""}, r.flags)
	require.Equal(t, []uint64{hs[0].Uint64(), hs[1].Uint64(), hs[2].Uint64(), hs[4].Uint64()}, r.first)
	require.Equal(t, uint64(1), r.missed)
	r.mu.Unlock()
	st := sub.Stats()
	require.Equal(t, uint64(1), st.Restarts)
	require.Equal(t, uint64(1), st.Missed)
	require.Equal(t, uint64(3), st.Connects)
}

// TestSubscribeRestartReplays: after a restart, the new stream's batches
// sent before the subscription reconnected come from the replay socket,
// the first marked Restarted.
func TestSubscribeRestartReplays(t *testing.T) {
	addr, raddr := freePort(t), freePort(t)
	hs := subHashes(t, 6)
	open := func() *events.Publisher {
		p, err := events.New("tcp://"+addr, events.WithReplay("tcp://"+raddr))
		require.NoError(t, err)
		return p
	}
	pub := open()
	var r received
	hold := make(chan struct{})
	sub, err := events.Subscribe(context.Background(), "tcp://"+addr, r.fn, events.WithRedialHold(hold),
		events.WithReplayFrom("tcp://"+raddr))
	require.NoError(t, err)
	defer sub.Close()
	waitSubscribers(t, pub, 1)
	for i := range 3 {
		publishOne(t, pub, hs[i])
	}
	r.wait(t, 3)
	_ = pub.Close()
	pub = open() // the subscription holds before it connects again: it hears nothing yet
	defer pub.Close()
	publishOne(t, pub, hs[3])
	close(hold)
	waitSubscribers(t, pub, 1)
	publishOne(t, pub, hs[4])
	r.wait(t, 5)
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Equal(t, []uint64{0, 1, 2, 0, 1}, r.seqs)
	require.Equal(t, []string{"", "", "", "RS", ""}, r.flags)
	require.Equal(t, hs[3].Uint64(), r.first[3])
	require.Zero(t, r.missed)
}

func TestSubscribeRejects(t *testing.T) {
	ctx := context.Background()
	fn := func(*events.Batch) {}
	for _, c := range []struct {
		endpoint string
		fn       func(*events.Batch)
		opts     []events.SubscribeOption
	}{
		{"udp://x:1", fn, nil},
		{"tcp://127.0.0.1:1", nil, nil},
		{"tcp://127.0.0.1:1", fn, []events.SubscribeOption{nil}},
		{"tcp://127.0.0.1:1", fn, []events.SubscribeOption{events.WithRedial(0)}},
		{"tcp://127.0.0.1:1", fn, []events.SubscribeOption{events.WithReplayFrom("bogus")}},
	} {
		_, err := events.Subscribe(ctx, c.endpoint, c.fn, c.opts...)
		require.ErrorIs(t, err, pool.ErrInvalidConfig, c.endpoint)
	}
	// Nobody listens: it fails after the dial wait.
	start := time.Now()
	_, err := events.Subscribe(ctx, "tcp://"+freePort(t), fn, events.WithDialWait(100*time.Millisecond))
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)

	var nilSub *events.Subscription
	require.ErrorIs(t, nilSub.Close(), pool.ErrClosed)
	require.Zero(t, nilSub.Stats())
	require.Nil(t, nilSub.Done())
	var zero events.Subscription
	require.ErrorIs(t, zero.Close(), pool.ErrClosed)
	require.Zero(t, zero.Stats())
}

// TestSubscribeContextStops: a done context stops the subscription as
// Close does.
func TestSubscribeContextStops(t *testing.T) {
	pub, err := events.New("tcp://127.0.0.1:0")
	require.NoError(t, err)
	defer pub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := events.Subscribe(ctx, "tcp://"+pub.Addr().String(), func(*events.Batch) {})
	require.NoError(t, err)
	waitSubscribers(t, pub, 1)
	cancel()
	select {
	case <-sub.Done():
	case <-time.After(wait):
		t.Fatal("the subscription did not stop")
	}
	require.NoError(t, sub.Close())
}
