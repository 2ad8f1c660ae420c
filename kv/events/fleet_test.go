package events_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/pool"
)

// The faults a fleet's routers bring: a subscriber stalled, killed,
// restarted, a gap that replay fills, and Close with all of them around.

// rawSub is a subscriber written at the connection level, so that a test
// can stop reading (a stalled router) or drop the connection (a killed one).
type rawSub struct {
	nc net.Conn
	zc *zmq4.Conn
}

// dialRaw connects a raw subscriber of topic to addr; rcvbuf > 0 shrinks
// its receive buffer so that it stalls the publisher's writes sooner.
func dialRaw(t *testing.T, addr net.Addr, topic string, rcvbuf int) *rawSub {
	t.Helper()
	nc, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	if rcvbuf > 0 {
		require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(rcvbuf))
	}
	zc, err := zmq4.Open(nc, null.Security(), zmq4.Sub, nil, false, nil)
	require.NoError(t, err)
	require.NoError(t, zc.SendMsg(zmq4.NewMsg(append([]byte{1}, topic...))))
	t.Cleanup(func() { nc.Close() })
	return &rawSub{nc: nc, zc: zc}
}

// seqOf returns the sequence number of a published message.
func seqOf(t *testing.T, msg zmq4.Msg) uint64 {
	t.Helper()
	require.Len(t, msg.Frames, 3)
	require.Len(t, msg.Frames[1], 8)
	return binary.BigEndian.Uint64(msg.Frames[1])
}

// start reads the subscriber's messages into the returned channel from now
// on, until its connection is closed.
func (s *rawSub) start(t *testing.T) <-chan zmq4.Msg {
	msgs := make(chan zmq4.Msg, 1<<16)
	done := make(chan struct{})
	t.Cleanup(func() {
		s.nc.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			msg, err := s.zc.RecvMsg()
			if err != nil {
				return
			}
			msgs <- msg
		}
	}()
	return msgs
}

func (s *rawSub) next(t *testing.T) zmq4.Msg {
	t.Helper()
	require.NoError(t, s.nc.SetReadDeadline(time.Now().Add(wait)))
	msg, err := s.zc.RecvMsg()
	require.NoError(t, err)
	return msg
}

// bigEvent is a stored run of 64 blocks of 16 tokens: about 4 KiB a batch,
// so that a stalled subscriber's socket buffers fill after a few MiB.
func bigEvent(t *testing.T) *kv.Event {
	hs := hashes(t, 64)
	return &kv.Event{Kind: kv.BlockStored, Hashes: hs, Tokens: seq(0, 64*16), BlockSize: 16}
}

// waitFor polls cond until it holds or the test's wait runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(time.Millisecond)
	}
}

func waitSubscribers(t *testing.T, pub *events.Publisher, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, pub.WaitSubscribers(ctx, n))
}

// A stalled subscriber loses its own batches only: the healthy one gets
// every batch, in order, without a gap, while the stalled one's queue
// overflows (counted for it); Close then returns within its linger and
// reports the stalled subscriber's undelivered batches.
func TestStalledSubscriberCostsOnlyItself(t *testing.T) {
	const n = 3000
	const linger = 200 * time.Millisecond
	pub := newPublisher(t, events.WithBatchSize(1), events.WithBuffer(n), events.WithHighWaterMark(64),
		events.WithLinger(linger), events.WithWriteTimeout(time.Minute))
	healthy := subscribe(t, pub, "")
	stalled := dialRaw(t, pub.Addr(), "", 4096) // never reads
	waitSubscribers(t, pub, 2)

	record := pub.Subscriber()
	ev := bigEvent(t)
	start := time.Now()
	var worst time.Duration
	last := start
	got := 0
	// receive takes the healthy subscriber's next batch, and times the
	// wait since the one before.
	receive := func() {
		select {
		case msg := <-healthy.msgs:
			require.Equal(t, uint64(got), seqOf(t, msg), "the healthy subscriber sees no gap")
			got++
			now := time.Now()
			worst = max(worst, now.Sub(last))
			last = now
		case <-time.After(wait):
			t.Fatalf("the healthy subscriber got %d of %d batches", got, n)
		}
	}
	for i := range n {
		record(ev) // a batch of one event, handed over at once
		// The healthy subscriber keeps up within half its queue, as a
		// router that reads as fast as the engine publishes; the stalled
		// one reads nothing.
		for i+1-got > 32 {
			receive()
		}
	}
	for got < n {
		receive()
	}
	took := time.Since(start)
	t.Logf("healthy subscriber: %d batches in %v, longest wait between two %v", n, took, worst)
	require.Less(t, worst, 2*time.Second, "the healthy subscriber never waits on the stalled one")

	// A writer counts a batch as sent after its write returns, which can
	// be after the subscriber has read it: wait for the count to settle.
	var slow, fast events.SubscriberStats
	waitFor(t, "the healthy subscriber's count", func() bool {
		subs := pub.Subscribers()
		require.Len(t, subs, 2)
		for _, s := range subs {
			if s.Remote == stalled.nc.LocalAddr().String() {
				slow = s
			} else {
				fast = s
			}
		}
		return fast.Sent+fast.Dropped >= n
	})
	require.Zero(t, fast.Dropped, "the healthy subscriber lost nothing")
	require.Equal(t, uint64(n), fast.Sent)
	require.Positive(t, slow.Dropped, "the stalled subscriber's queue overflowed")
	require.LessOrEqual(t, slow.Queued, 64)
	t.Logf("stalled subscriber: %d written to its socket, %d dropped, %d queued", slow.Sent, slow.Dropped, slow.Queued)

	began := time.Now()
	err := pub.Close()
	closed := time.Since(began)
	t.Logf("Close with a stalled subscriber: %v", closed)
	require.Less(t, closed, linger+time.Second, "Close is bounded by the linger and a grace")
	var dropped *events.DroppedError
	require.ErrorAs(t, err, &dropped)
	require.ErrorIs(t, err, events.ErrDropped)
	st := pub.Snapshot()
	require.Equal(t, st.Undelivered, dropped.Undelivered)
	require.Zero(t, dropped.Batches, "every batch was published")
	require.GreaterOrEqual(t, st.Undelivered, slow.Dropped+uint64(slow.Queued), "what the stalled subscriber had queued is counted too")
	require.Equal(t, uint64(2*n), st.Delivered+st.Undelivered, "every copy is delivered or counted")
	require.Zero(t, st.Subscribers)
}

// A subscriber whose connection accepts nothing for the write timeout is
// disconnected, and what it had queued is counted.
func TestWriteTimeoutDisconnects(t *testing.T) {
	pub := newPublisher(t, events.WithBatchSize(1), events.WithBuffer(4096), events.WithHighWaterMark(0),
		events.WithWriteTimeout(100*time.Millisecond))
	stalled := dialRaw(t, pub.Addr(), "", 4096)
	_ = stalled
	waitSubscribers(t, pub, 1)
	record := pub.Subscriber()
	ev := bigEvent(t)
	for range 3000 {
		record(ev)
	}
	waitFor(t, "the stalled subscriber's disconnection", func() bool { return pub.Snapshot().Left == 1 })
	st := pub.Snapshot()
	require.Equal(t, uint64(1), st.TimedOut)
	require.Zero(t, st.Subscribers)
	require.Positive(t, st.Undelivered)
	err := pub.Close()
	require.ErrorIs(t, err, events.ErrDropped)
	st = pub.Snapshot()
	require.Equal(t, uint64(3000), st.Delivered+st.Undelivered+st.Unheard)
}

// A killed subscriber is forgotten; the others go on, and Close neither
// waits for it nor fails because of it.
func TestKilledSubscriber(t *testing.T) {
	pub := newPublisher(t, events.WithBatchSize(1), events.WithLinger(time.Second))
	healthy := subscribe(t, pub, "")
	victim := dialRaw(t, pub.Addr(), "", 0)
	waitSubscribers(t, pub, 2)
	record := pub.Subscriber()
	for range 10 {
		record(cleared)
	}
	for i := range 10 {
		require.Equal(t, uint64(i), seqOf(t, victim.next(t)))
		_, s, _ := healthy.next(t)
		require.Equal(t, uint64(i), s)
	}
	require.NoError(t, victim.nc.Close()) // killed
	waitFor(t, "the publisher to see the subscriber go", func() bool { return pub.Snapshot().Subscribers == 1 })
	for range 10 {
		record(cleared)
	}
	for i := range 10 {
		_, s, _ := healthy.next(t)
		require.Equal(t, uint64(10+i), s)
	}
	began := time.Now()
	require.NoError(t, pub.Close())
	require.Less(t, time.Since(began), time.Second)
	st := pub.Snapshot()
	require.Equal(t, uint64(2), st.Joined)
	require.Equal(t, uint64(1), st.Left)
	require.Equal(t, uint64(30), st.Delivered)
}

// cleared is a one-event batch.
var cleared = &kv.Event{Kind: kv.AllBlocksCleared}

// replayFrom asks the replay socket for the batches from start and returns
// their sequence numbers and payloads, up to the end marker.
func replayFrom(t *testing.T, addr net.Addr, start uint64) ([]uint64, [][]byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := zmq4.NewDealer(ctx, zmq4.WithAutomaticReconnect(false), zmq4.WithDialerTimeout(wait))
	defer d.Close()
	require.NoError(t, d.Dial("tcp://"+addr.String()))
	var req [8]byte
	binary.BigEndian.PutUint64(req[:], start)
	require.NoError(t, d.Send(zmq4.NewMsgFrom([]byte{}, req[:])))
	var seqs []uint64
	var payloads [][]byte
	for {
		msg, err := d.Recv()
		require.NoError(t, err)
		require.Len(t, msg.Frames, 3, "[empty, seq, payload]")
		require.Empty(t, msg.Frames[0])
		if [8]byte(msg.Frames[1]) == events.EndOfReplay {
			require.Empty(t, msg.Frames[2])
			return seqs, payloads
		}
		seqs = append(seqs, binary.BigEndian.Uint64(msg.Frames[1]))
		payloads = append(payloads, msg.Frames[2])
	}
}

// A subscriber restarted after it was killed misses what was published
// while it was gone (a gap in the sequence numbers) and gets it back,
// byte for byte, from the replay socket, up to vLLM's end marker.
func TestRestartedSubscriberReplays(t *testing.T) {
	pub := newPublisher(t, events.WithBatchSize(1), events.WithReplay(loopback), events.WithReplayBuffer(100))
	defer pub.Close()
	first := dialRaw(t, pub.Addr(), "", 0)
	waitSubscribers(t, pub, 1)
	record := pub.Subscriber()
	hs := hashes(t, 30)
	for i := range 10 {
		record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]})
	}
	for i := range 10 {
		require.Equal(t, uint64(i), seqOf(t, first.next(t)))
	}
	require.NoError(t, first.nc.Close())
	waitFor(t, "the subscriber to go", func() bool { return pub.Snapshot().Subscribers == 0 })
	for i := 10; i < 20; i++ { // nobody hears these
		record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]})
	}
	waitFor(t, "the unheard batches", func() bool { return pub.Snapshot().Unheard == 10 })

	restarted := subscribe(t, pub, "")
	for i := 20; i < 30; i++ {
		record(&kv.Event{Kind: kv.BlockRemoved, Hashes: hs[i : i+1]})
	}
	live := map[uint64][]byte{}
	for i := range 10 {
		msg := <-restarted.msgs
		s := seqOf(t, msg)
		require.Equal(t, uint64(20+i), s)
		live[s] = msg.Frames[2]
	}
	// The gap is 10..19: ask from 10.
	seqs, payloads := replayFrom(t, pub.ReplayAddr(), 10)
	require.Len(t, seqs, 20)
	for i, s := range seqs {
		require.Equal(t, uint64(10+i), s)
		if p, ok := live[s]; ok {
			require.Equal(t, p, payloads[i], "the replay sends the very payload")
		}
		_, _, b := decodeMessage(t, zmq4.NewMsgFrom(nil, make([]byte, 8), payloads[i]))
		checkEvent(t, form{events.Uint64Hashes, "GPU"}, kv.Event{Kind: kv.BlockRemoved, Hashes: hs[s : s+1]}, b.events[0])
	}
	st := pub.Snapshot()
	require.Equal(t, uint64(1), st.ReplayRequests)
}

// A slow subscriber that overflowed finds the gap when it reads again and
// fills it from the replay socket; the buffer keeps only the most recent
// batches, so what is older is gone for good (a gap in the replay too).
func TestGapFilledByReplay(t *testing.T) {
	const n = 400
	pub := newPublisher(t, events.WithBatchSize(1), events.WithBuffer(n), events.WithHighWaterMark(8),
		events.WithReplay(loopback), events.WithReplayBuffer(300), events.WithWriteTimeout(time.Minute),
		events.WithSendBuffer(8<<10))
	defer pub.Close()
	slow := dialRaw(t, pub.Addr(), "", 0) // a small receive buffer would make the resumed reads crawl
	waitSubscribers(t, pub, 1)
	record := pub.Subscriber()
	ev := bigEvent(t)
	for range n {
		record(ev)
	}
	waitFor(t, "every batch published", func() bool { return pub.Snapshot().Published == n })
	require.Positive(t, pub.Subscribers()[0].Dropped, "the slow subscriber overflowed")

	// Read again until the writer has written or dropped every batch;
	// note the gaps.
	msgs := slow.start(t)
	waitFor(t, "the slow subscriber's queue to drain", func() bool {
		st := pub.Subscribers()[0]
		return st.Sent+st.Dropped == n
	})
	sent := pub.Subscribers()[0].Sent
	var missing []uint64
	next := uint64(0)
	for range sent {
		var msg zmq4.Msg
		select {
		case msg = <-msgs:
		case <-time.After(wait):
			t.Fatal("a written batch never arrived")
		}
		s := seqOf(t, msg)
		require.GreaterOrEqual(t, s, next)
		for ; next < s; next++ {
			missing = append(missing, next)
		}
		next = s + 1
	}
	for ; next < n; next++ {
		missing = append(missing, next)
	}
	require.NotEmpty(t, missing)
	require.Equal(t, uint64(len(missing)), pub.Subscribers()[0].Dropped, "each drop is one missing batch")

	seqs, _ := replayFrom(t, pub.ReplayAddr(), missing[0])
	have := map[uint64]bool{}
	for _, s := range seqs {
		have[s] = true
	}
	for _, s := range missing {
		require.Equal(t, s >= n-300, have[s], "batch %d: replayed if among the 300 kept", s)
	}
	// A request from 0 gets the 300 kept, from n-300 on.
	seqs, _ = replayFrom(t, pub.ReplayAddr(), 0)
	require.Len(t, seqs, 300)
	require.Equal(t, uint64(n-300), seqs[0])
}

// Malformed replay requests are ignored and counted, as vLLM ignores them;
// the connection still answers a valid one after.
func TestReplayIgnoresMalformed(t *testing.T) {
	pub := newPublisher(t, events.WithReplay(loopback))
	defer pub.Close()
	pub.Subscriber()(cleared)
	pub.Flush()
	waitFor(t, "the batch", func() bool { return pub.Snapshot().Published == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := zmq4.NewDealer(ctx, zmq4.WithAutomaticReconnect(false))
	defer d.Close()
	require.NoError(t, d.Dial("tcp://"+pub.ReplayAddr().String()))
	for _, bad := range []zmq4.Msg{
		zmq4.NewMsgFrom([]byte{}, []byte{1, 2, 3}),           // short sequence number
		zmq4.NewMsgFrom([]byte{0}, make([]byte, 8)),          // no empty delimiter
		zmq4.NewMsgFrom(make([]byte, 8)),                     // one frame
		zmq4.NewMsgFrom([]byte{}, make([]byte, 8), []byte{}), // three frames
	} {
		require.NoError(t, d.Send(bad))
	}
	require.NoError(t, d.Send(zmq4.NewMsgFrom([]byte{}, make([]byte, 8))))
	msg, err := d.Recv()
	require.NoError(t, err)
	require.Equal(t, make([]byte, 8), msg.Frames[1], "batch 0 first: the bad requests got no answer")
	msg, err = d.Recv()
	require.NoError(t, err)
	require.Equal(t, events.EndOfReplay[:], msg.Frames[1])
	st := pub.Snapshot()
	require.Equal(t, uint64(4), st.ReplayInvalid)
	require.Equal(t, uint64(1), st.ReplayRequests)
}

// WaitSubscribers returns when enough subscribers cover the topic, the
// context's error when it is done first, and pool.ErrClosed after Close.
func TestWaitSubscribers(t *testing.T) {
	pub := newPublisher(t, events.WithTopic("kv@pod@model"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, pub.WaitSubscribers(ctx, 1), context.DeadlineExceeded)

	other := dialRaw(t, pub.Addr(), "kv@other", 0) // covers another topic: not counted
	_ = other
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, pub.WaitSubscribers(ctx2, 1), context.DeadlineExceeded)

	done := make(chan error, 1)
	go func() { done <- pub.WaitSubscribers(context.Background(), 2) }()
	dialRaw(t, pub.Addr(), "kv@", 0)
	dialRaw(t, pub.Addr(), "", 0)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("WaitSubscribers did not return")
	}
	go func() { done <- pub.WaitSubscribers(context.Background(), 10) }()
	require.NoError(t, pub.Close())
	require.ErrorIs(t, <-done, pool.ErrClosed)
}

// Close returns within its linger and a grace even with a connection
// stuck before its handshake and a stalled subscriber disconnecting while
// it waits.
func TestCloseBounded(t *testing.T) {
	const linger = 100 * time.Millisecond
	pub := newPublisher(t, events.WithBatchSize(1), events.WithBuffer(4096), events.WithLinger(linger),
		events.WithHighWaterMark(0), events.WithWriteTimeout(time.Minute))
	silent, err := net.Dial("tcp", pub.Addr().String()) // connects, never greets
	require.NoError(t, err)
	defer silent.Close()
	stalled := dialRaw(t, pub.Addr(), "", 4096)
	leaving := dialRaw(t, pub.Addr(), "", 4096)
	waitSubscribers(t, pub, 2)
	record := pub.Subscriber()
	ev := bigEvent(t)
	for range 2000 {
		record(ev)
	}
	pub.Flush()
	waitFor(t, "every batch published", func() bool { return pub.Snapshot().Published == 2000 })
	time.AfterFunc(linger/2, func() { leaving.nc.Close() })
	began := time.Now()
	err = pub.Close()
	took := time.Since(began)
	t.Logf("Close: %v", took)
	require.Less(t, took, linger+time.Second)
	require.ErrorIs(t, err, events.ErrDropped)
	st := pub.Snapshot()
	require.Equal(t, uint64(2*2000), st.Delivered+st.Undelivered)
	_ = stalled
}

// With WithDial the publisher connects to a listening subscriber, and
// connects again when the subscriber is restarted on the same address.
func TestDialReconnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := func(addr string) zmq4.Socket {
		s := zmq4.NewSub(ctx)
		require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
		require.NoError(t, s.Listen(addr))
		return s
	}
	sub := listen("tcp://127.0.0.1:0")
	addr := sub.Addr().String()
	pub, err := events.New("tcp://"+addr, events.WithDial(), events.WithBatchSize(1))
	require.NoError(t, err)
	defer pub.Close()
	waitSubscribers(t, pub, 1)
	pub.Subscriber()(cleared)
	msg, err := sub.Recv()
	require.NoError(t, err)
	require.Equal(t, uint64(0), seqOf(t, msg))
	require.NoError(t, sub.Close()) // the router restarts

	waitFor(t, "the publisher to see the subscriber go", func() bool { return pub.Snapshot().Subscribers == 0 })
	sub = listen("tcp://" + addr)
	defer sub.Close()
	waitSubscribers(t, pub, 1)
	pub.Subscriber()(cleared)
	msg, err = sub.Recv()
	require.NoError(t, err)
	require.Equal(t, uint64(1), seqOf(t, msg))
	require.GreaterOrEqual(t, pub.Snapshot().Joined, uint64(2))
}

// New rejects bad endpoints and options with pool.ErrInvalidConfig.
func TestNewRejects(t *testing.T) {
	for _, c := range []struct {
		name     string
		endpoint string
		opts     []events.Option
	}{
		{"no scheme", "127.0.0.1:0", nil},
		{"inproc", "inproc://x", nil},
		{"no port", "tcp://127.0.0.1", nil},
		{"empty ipc", "ipc://", nil},
		{"write timeout", loopback, []events.Option{events.WithWriteTimeout(0)}},
		{"replay buffer", loopback, []events.Option{events.WithReplay(loopback), events.WithReplayBuffer(0)}},
		{"replay endpoint", loopback, []events.Option{events.WithReplay("udp://x:1")}},
		{"nil option", loopback, []events.Option{nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := events.New(c.endpoint, c.opts...)
			require.ErrorIs(t, err, pool.ErrInvalidConfig)
			require.Nil(t, p)
		})
	}
}

// A nil or zero Publisher fails or does nothing; it never panics.
func TestNilPublisher(t *testing.T) {
	for _, p := range []*events.Publisher{nil, new(events.Publisher)} {
		require.ErrorIs(t, p.Close(), pool.ErrClosed)
		p.Flush()
		p.Subscriber()(cleared)
		require.Nil(t, p.Addr())
		require.Nil(t, p.ReplayAddr())
		require.Empty(t, p.Subscribers())
		require.True(t, errors.Is(p.WaitSubscribers(context.Background(), 1), pool.ErrClosed))
		_ = p.Snapshot()
	}
}

// Every goroutine the publisher starts (accept, per-subscriber reader and
// writer, replay) returns by Close, whatever the subscribers did.
func TestGoroutinesExit(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		pub := newPublisher(t, events.WithBatchSize(1), events.WithReplay(loopback), events.WithLinger(50*time.Millisecond))
		a, err := net.Dial("tcp", pub.Addr().String()) // never greets
		require.NoError(t, err)
		defer a.Close()
		b := dialRaw(t, pub.Addr(), "", 4096) // stalls
		c := dialRaw(t, pub.Addr(), "", 0)    // killed
		waitSubscribers(t, pub, 2)
		r, err := net.Dial("tcp", pub.ReplayAddr().String()) // a replay client that never greets
		require.NoError(t, err)
		defer r.Close()
		ev := bigEvent(t)
		for range 500 {
			pub.Subscriber()(ev)
		}
		require.NoError(t, c.nc.Close())
		_ = pub.Close()
		_ = b
	}()
	waitFor(t, "the publisher's goroutines to return", func() bool { return runtime.NumGoroutine() <= before })
}
