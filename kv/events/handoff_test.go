package events

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
)

// The rare interleavings of the owner and the flush timer, driven one step
// at a time: the test plays the publisher's goroutine (the real one waits
// on hold) and a fake socket records what is sent.

// fakeSocket records the sequence numbers of the messages sent.
type fakeSocket struct {
	zmq4.Socket
	mu   sync.Mutex
	seqs []uint64
}

func (f *fakeSocket) Send(msg zmq4.Msg) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seqs = append(f.seqs, binary.BigEndian.Uint64(msg.Frames[1]))
	return nil
}

func (f *fakeSocket) sent() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.seqs...)
}

func (f *fakeSocket) Close() error     { return nil }
func (f *fakeSocket) Addr() net.Addr   { return nil }
func (f *fakeSocket) Topics() []string { return nil }

// heldPublisher returns a publisher whose goroutine waits on the returned
// channel, with a fake socket.
func heldPublisher(t *testing.T, opts ...Option) (*Publisher, *fakeSocket, chan struct{}) {
	t.Helper()
	hold := make(chan struct{})
	p, err := New("tcp://127.0.0.1:0", append(opts, WithHold(hold))...)
	require.NoError(t, err)
	real := p.sock
	sock := &fakeSocket{}
	p.sock = sock // before the goroutine reads it: it waits on hold
	t.Cleanup(func() { real.Close() })
	return p, sock, hold
}

var cleared = &kv.Event{Kind: kv.AllBlocksCleared}

func status(b *batch) uint64 { return b.state.Load() & 3 }

// The timer takes the owner's batch between two events: the owner's next
// Flush finds nothing to seal, and its next event starts a new batch.
func TestTimerTakesOwnersBatch(t *testing.T) {
	p, sock, hold := heldPublisher(t)
	record := p.Subscriber()
	record(cleared)
	first := p.cur
	require.Equal(t, uint64(open), status(first))
	require.False(t, p.steal())
	require.Equal(t, []uint64{0}, sock.sent())
	require.Equal(t, uint64(sealed), status(first), "recycled, sealed with the next generation")

	p.Flush() // the owner's CAS fails: nothing to seal
	require.Nil(t, p.cur)
	record(cleared)
	require.NotNil(t, p.cur)
	require.Equal(t, uint64(1), p.cur.seq)
	p.Flush()
	require.Equal(t, 1, len(p.queue))
	close(hold)
	require.NoError(t, p.Close())
	require.Equal(t, []uint64{0, 1}, sock.sent())
	require.Equal(t, Stats{Events: 2, Batches: 2, Published: 2, PublishedEvents: 2}, p.Snapshot())
}

// The owner's stale pointer to a batch the timer took and recycled fails
// its CAS on the bumped generation, even when that batch is free and
// sealed, so the owner never writes into a free batch.
func TestStaleBatchAfterRecycle(t *testing.T) {
	p, sock, hold := heldPublisher(t, WithBuffer(1))
	record := p.Subscriber()
	record(cleared)
	stale, gen := p.cur, p.curGen
	require.False(t, p.steal())
	require.NotEqual(t, gen, stale.state.Load()>>2)
	require.False(t, stale.state.CompareAndSwap(state(gen, open), state(gen, writing)))
	record(cleared)
	require.Equal(t, uint64(1), p.cur.seq)
	close(hold)
	require.NoError(t, p.Close())
	require.Equal(t, []uint64{0, 1}, sock.sent())
}

// The timer leaves a batch the owner is writing, and asks to retry.
func TestTimerLeavesBatchBeingWritten(t *testing.T) {
	p, sock, hold := heldPublisher(t)
	record := p.Subscriber()
	record(cleared)
	b := p.cur
	require.True(t, b.state.CompareAndSwap(state(p.curGen, open), state(p.curGen, writing))) // the owner, mid-event
	require.True(t, p.steal())
	require.Empty(t, sock.sent())
	b.state.Store(state(p.curGen, open))
	require.False(t, p.steal())
	require.Equal(t, []uint64{0}, sock.sent())
	close(hold)
	require.NoError(t, p.Close())
}

// A stolen batch is published after the queued batches numbered before it
// and before those numbered after it (which the owner queued while the
// timer was busy), so subscribers see the order of the events.
func TestStealKeepsOrder(t *testing.T) {
	p, sock, hold := heldPublisher(t, WithBatchSize(1))
	record := p.Subscriber()
	record(cleared) // batch 0, queued
	// Batch 1: the owner's open batch, as the timer's CAS finds it.
	b1 := <-p.free
	b1.state.Store(state(0, writing))
	b1.seq = 1
	b1.add(cleared)
	b1.state.Store(state(0, open))
	p.shared.Store(b1)
	// Batch 2: queued by the owner after the CAS.
	b2 := <-p.free
	b2.seq = 2
	b2.add(cleared)
	p.queue <- b2
	p.nextSeq = 3
	require.False(t, p.steal())
	require.Equal(t, []uint64{0, 1, 2}, sock.sent())
	close(hold)
	require.NoError(t, p.Close())
}
