package pool_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// recording wraps a transport and records every chunk its drains deliver,
// in delivery order, so that a model can replay exactly what the pool saw
// whatever the timing of the worker goroutines.
type recording struct {
	pool.Transport
	got []pool.Handle // delivered since the model last looked
}

func (r *recording) Drain(sink *pool.Sink) {
	r.Transport.Drain(pool.NewSink(func(chunk []pool.Handle) {
		r.got = append(r.got, chunk...)
		sink.Put(chunk)
	}))
}

// transports are every transport of the tree, bounded ones also at tiny
// bounds so that workers block and drains take partial batches.
var transports = []struct {
	name string
	make func() (pool.Transport, error)
}{
	{"mailbox", func() (pool.Transport, error) { return mailbox.New(), nil }},
	{"sharded-handle", func() (pool.Transport, error) { return sharded.New() }},
	{"sharded-handle-tiny", func() (pool.Transport, error) {
		return sharded.New(sharded.WithCapacity(3), sharded.WithBatch(2))
	}},
	{"sharded-chunk", func() (pool.Transport, error) { return sharded.New(sharded.WithChunks()) }},
	{"sharded-chunk-tiny", func() (pool.Transport, error) {
		return sharded.New(sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1))
	}},
	{"shared", func() (pool.Transport, error) { return shared.New() }},
	{"shared-tiny", func() (pool.Transport, error) { return shared.New(shared.WithCapacity(5), shared.WithBatch(2)) }},
}

func mkHandle(id, idx uint32, gen uint64) pool.Handle {
	var b [pool.HandleSize]byte
	binary.LittleEndian.PutUint64(b[:], gen)
	binary.LittleEndian.PutUint32(b[8:], idx)
	binary.LittleEndian.PutUint32(b[12:], id)
	var h pool.Handle
	if err := h.UnmarshalBinary(b[:]); err != nil {
		panic(err)
	}
	return h
}

func poolID(h pool.Handle) uint32 {
	b, _ := h.MarshalBinary()
	return binary.LittleEndian.Uint32(b[12:])
}

// worker frees chunks on its own goroutine through its own sender; a nil
// chunk asks it to close its sender and open a new one.
type worker struct {
	cmds chan []pool.Handle
}

const fuzzWorkers = 3

// FuzzOps decodes bytes, with the decoder the conformance suite's
// accounting case drives its pools with (model.Pool.Next) in its extended
// mode, into a pool combination (transport × backing × policy, every one in
// the tree) and a sequence of operations: allocations (Alloc, AllocBytes,
// AllocChunk), local frees, mixed FreeChunk, frees and Bytes of stale
// handles, forgeries, remote frees by real worker goroutines (of live
// handles, of stale ones, and of handles the owner then frees first),
// retiring senders, drains, Bytes, Stats and Snapshot. It runs them on the
// pool and on the model and compares every result: the model predicts
// every handle exactly by the reuse order, and the accounting. Delivery
// timing is the workers'; the model replays exactly what each drain
// delivered.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 10, 2, 7, 1, 0, 8, 17, 9, 0, 4, 0, 6, 0, 0, 6, 0, 1, 11, 3, 5,
		12, 1, 0, 0, 0, 7, 0, 1, 13, 0, 14, 0, 2, 15, 2, 8, 16, 17})
	f.Add([]byte{16, 10, 4, 10, 2, 0, 0, 0, 1, 7, 7, 1, 0, 0, 0, 1, 10, 4, 8, 17, 9, 16})
	f.Add([]byte{13, 0, 0, 0, 0, 0, 0, 7, 2, 0, 14, 0, 1, 15, 0, 15, 1, 12, 3, 0, 1, 13, 0, 8, 8, 17})
	f.Add([]byte{25, 10, 1, 11, 7, 15, 11, 0, 0, 4, 1, 5, 0, 6, 0, 1, 6, 0, 0, 9, 1, 17})
	f.Add([]byte{3, 10, 4, 10, 2, 7, 2, 0, 7, 2, 1, 13, 1, 13, 0, 7, 1, 2, 12, 2, 0, 0, 1, 0, 8, 17, 16})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		const n = 8
		src := model.NewBytes(data)
		combo := src.IntN(len(transports) * 4)
		tc := transports[combo%len(transports)]
		useMmap := combo/len(transports)%2 == 1
		fifoOrder := combo/len(transports)/2%2 == 1
		var pol pool.ReusePolicy = lifo.Policy{}
		if fifoOrder {
			pol = fifo.Policy{}
		}
		var b pool.Backing
		var err error
		if useMmap {
			if b, err = mmap.New(16, n); errors.Is(err, errors.ErrUnsupported) {
				t.Skip(err)
			}
		} else {
			b, err = heap.New(16, n)
		}
		if err != nil {
			t.Fatal(err)
		}
		inner, err := tc.make()
		if err != nil {
			t.Fatal(err)
		}
		rec := &recording{Transport: inner}
		p, err := pool.New(b, rec, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		m := model.NewPool[pool.Handle](n, fifoOrder)
		m.Extended, m.Senders = true, fuzzWorkers
		first, err := p.Alloc() // learn the pool id; freed at once
		if err != nil {
			t.Fatal(err)
		}
		id := poolID(first)
		// due is the handle the model says the next allocation gives.
		due := func() pool.Handle {
			i, gen := m.Due()
			return mkHandle(id, uint32(i), gen)
		}
		if want := due(); want != first {
			t.Fatalf("first Alloc = %v, model wants %v", first, want)
		}
		if err := p.Free(first); err != nil {
			t.Fatalf("first free: %v", err)
		}
		m.Free(m.Alloc(first, 0))
		fail := func(k int, format string, args ...any) {
			t.Helper()
			t.Fatalf("%s, op %d: %s", tc.name, k, fmt.Sprintf(format, args...))
		}

		// Workers free what the owner hands them, each through its own
		// sender; the owner never waits for them until the end.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var workerErr error
		workers := make([]worker, fuzzWorkers)
		for w := range workers {
			workers[w].cmds = make(chan []pool.Handle, 64)
			s, err := p.NewSender()
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for chunk := range workers[w].cmds {
					var err error
					if chunk == nil {
						if err = s.Close(); err == nil {
							s, err = p.NewSender()
						}
					} else {
						err = s.FreeChunk(chunk)
					}
					if err != nil {
						mu.Lock()
						workerErr = errors.Join(workerErr, err)
						mu.Unlock()
					}
				}
			})
		}
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			for _, w := range workers {
				close(w.cmds)
			}
			idle := make(chan struct{})
			go func() { wg.Wait(); close(idle) }()
			for {
				select {
				case <-idle:
					return
				default:
					// Bounded transports need the owner to drain
					// while workers finish.
					_, _ = p.Drain()
				}
			}
		}
		defer stop()
		// look replays what drains delivered since it last looked and
		// returns how many blocks they freed.
		look := func(k int) int {
			freed := 0
			for _, h := range rec.got {
				ok, sent := m.Delivered(h)
				if !sent {
					fail(k, "a drain delivered %v, which no worker was given", h)
				}
				if ok {
					freed++
				}
			}
			rec.got = rec.got[:0]
			return freed
		}
		// drain is the owner's Drain, checked against the model.
		drain := func(k int) {
			t.Helper()
			got, err := p.Drain()
			if want := look(k); got != want {
				fail(k, "Drain freed %d, the model %d", got, want)
			}
			rejN, rejFirst := m.Report()
			if rejN == 0 {
				if err != nil {
					fail(k, "Drain reported %v, the model saw no rejection", err)
				}
				return
			}
			var rej *pool.RejectedError
			if !errors.As(err, &rej) || rej.Rejected != rejN || rej.First != rejFirst {
				fail(k, "Drain reported %v; the model saw %d rejections, first %v", err, rejN, rejFirst)
			}
		}
		// dispatch hands a chunk to worker w, draining while its queue of
		// commands is full (its sends may be waiting for a drain).
		dispatch := func(k, w int, chunk []pool.Handle) {
			for {
				select {
				case workers[w].cmds <- chunk:
					return
				default:
					drain(k)
				}
			}
		}
		// alloc checks a new handle against the model's prediction and
		// writes the op number into its block.
		alloc := func(k int, h pool.Handle, buf []byte) {
			t.Helper()
			if want := due(); h != want {
				fail(k, "allocation gave %v, the model wants %v", h, want)
			}
			if buf == nil {
				var err error
				if buf, err = p.Bytes(h); err != nil {
					fail(k, "Bytes of a new handle: %v", err)
				}
			}
			buf[0] = byte(k)
			m.Alloc(h, byte(k))
		}
		keys := func(ss []*model.Slot[pool.Handle]) []pool.Handle {
			hs := make([]pool.Handle, len(ss))
			for i, s := range ss {
				hs[i] = s.Key
			}
			return hs
		}

		for k := 0; !src.Done(); k++ {
			switch op := m.Next(src); op.Kind {
			case model.PoolAlloc:
				var h pool.Handle
				var buf []byte
				var err error
				if op.How == 1 {
					h, buf, err = p.AllocBytes()
				} else {
					h, err = p.Alloc()
				}
				look(k)
				if len(m.FreeList) == 0 {
					if !errors.Is(err, pool.ErrExhausted) {
						fail(k, "allocation %+v with nothing free in the model = %v, %v", op, h, err)
					}
					break
				}
				if err != nil {
					fail(k, "allocation %+v with %d free in the model: %v", op, len(m.FreeList), err)
				}
				alloc(k, h, buf)
			case model.PoolAllocChunk: // all or nothing
				dst := make([]pool.Handle, op.N)
				err := p.AllocChunk(dst)
				look(k)
				if len(m.FreeList) < len(dst) {
					if !errors.Is(err, pool.ErrExhausted) {
						fail(k, "AllocChunk(%d) with %d free in the model = %v", len(dst), len(m.FreeList), err)
					}
					break
				}
				if err != nil {
					fail(k, "AllocChunk(%d) with %d free: %v", len(dst), len(m.FreeList), err)
				}
				for _, h := range dst {
					alloc(k, h, nil)
				}
			case model.PoolFree, model.PoolOvertake:
				// An overtaken handle is a worker's too: its drain
				// rejects the worker's copy.
				if err := p.Free(op.Slot.Key); err != nil {
					fail(k, "Free(%v) (%+v) = %v", op.Slot.Key, op, err)
				}
				m.Free(op.Slot)
			case model.PoolStale:
				h := op.Slot.Key
				if op.Path == 1 {
					if buf, err := p.Bytes(h); !errors.Is(err, pool.ErrStaleHandle) || buf != nil {
						fail(k, "Bytes of stale %v = %d bytes, %v", h, len(buf), err)
					}
				} else if err := p.Free(h); !errors.Is(err, pool.ErrStaleHandle) {
					fail(k, "stale Free(%v) = %v", h, err)
				}
				m.Refused(1)
			case model.PoolBytes: // every live block kept what was written
				for _, s := range m.Live {
					buf, err := p.Bytes(s.Key)
					if err != nil || buf[0] != s.Tag {
						fail(k, "Bytes(%v) = %v, %v; want first byte %d", s.Key, buf, err, s.Tag)
					}
				}
			case model.PoolSend:
				ss := m.Newest(op.N)
				m.Send(ss)
				dispatch(k, op.Sender, keys(ss))
			case model.PoolSendStale:
				m.Send([]*model.Slot[pool.Handle]{op.Slot})
				dispatch(k, op.Sender, []pool.Handle{op.Slot.Key})
			case model.PoolRetire:
				dispatch(k, op.Sender, nil)
			case model.PoolDrain:
				drain(k)
			case model.PoolForged: // zero, out of range, foreign, forged generation
				for _, c := range []struct {
					h    pool.Handle
					want error
				}{
					{pool.Handle{}, pool.ErrZeroHandle},
					{mkHandle(id, n+uint32(op.Past), 1), pool.ErrOutOfRange},
					{mkHandle(id^0x80000000, 0, 1), pool.ErrForeignHandle},
					{mkHandle(id, uint32(op.Index), m.Gen[op.Index]+2), pool.ErrStaleHandle},
				} {
					if err := p.Free(c.h); !errors.Is(err, c.want) {
						fail(k, "Free(%v) = %v, want %v", c.h, err, c.want)
					}
					m.Refused(1)
				}
			case model.PoolFreeChunk: // live handles, and a stale one after them
				chunk := keys(op.Slots)
				if op.Stale != nil {
					chunk = append(chunk, op.Stale.Key)
				}
				err := p.FreeChunk(chunk)
				var rej *pool.RejectedError
				switch {
				case op.Stale == nil && err != nil:
					fail(k, "FreeChunk of %d live handles = %v", len(chunk), err)
				case op.Stale != nil && (!errors.As(err, &rej) || rej.Rejected != 1 || rej.First != op.Stale.Key):
					fail(k, "FreeChunk of %d live handles and stale %v = %v", len(op.Slots), op.Stale.Key, err)
				}
				for _, s := range op.Slots {
					m.Free(s)
				}
				if op.Stale != nil {
					m.Refused(1)
				}
			case model.PoolSnapshot: // Snapshot after Stats agrees with Stats (workers may have submitted since)
				st := p.Stats()
				checkStats(t, k, tc.name, st, m)
				snap := p.Snapshot()
				if snap.RemoteSubmitted < st.RemoteSubmitted {
					fail(k, "Snapshot submitted %d < Stats submitted %d", snap.RemoteSubmitted, st.RemoteSubmitted)
				}
				snap.RemoteSubmitted = st.RemoteSubmitted
				if snap != st {
					fail(k, "Snapshot %+v after Stats %+v", snap, st)
				}
			case model.PoolStats: // exact accounting now
				checkStats(t, k, tc.name, p.Stats(), m)
			}
		}
		stop()
		if workerErr != nil {
			t.Fatalf("%s: a worker's send failed: %v", tc.name, workerErr)
		}
		// Every send has returned: drain until nothing more comes.
		for {
			n, _ := p.Drain()
			got := len(rec.got)
			look(-1)
			if n == 0 && got == 0 {
				break
			}
		}
		if len(m.InFlight) != 0 {
			t.Fatalf("%s: %d handles sent were never delivered: %v", tc.name, len(m.InFlight), keys(m.InFlight))
		}
		st := p.Stats()
		if st.RemoteSubmitted != m.Submitted || st.RemoteDrained != m.Submitted {
			t.Fatalf("%s: submitted %d, drained %d, the workers sent %d", tc.name, st.RemoteSubmitted, st.RemoteDrained, m.Submitted)
		}
		checkStats(t, -1, tc.name, st, m)
		// The free list is intact: everything free comes out in model order.
		for len(m.FreeList) > 0 {
			h, err := p.Alloc()
			if want := due(); err != nil || h != want {
				t.Fatalf("%s: final Alloc = %v, %v; model wants %v", tc.name, h, err, want)
			}
			m.Alloc(h, 0)
		}
		if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
			t.Fatalf("%s: Alloc with every block live = %v", tc.name, err)
		}
	})
}

// checkStats compares the pool's accounting with the model's; op -1 is
// the end.
func checkStats(t *testing.T, k int, name string, st pool.Stats, m *model.Pool[pool.Handle]) {
	t.Helper()
	if st.Capacity != len(m.Gen) || st.Live != m.Count() || st.Free != len(m.FreeList) || st.HighWater != m.HighWater ||
		st.Allocs != m.Allocs || st.Frees != m.Frees || st.Rejected != m.Rejected || st.RemoteDrained != m.Drained {
		t.Fatalf("%s, op %d: stats %+v; model live %d free %d high water %d allocs %d frees %d rejected %d drained %d",
			name, k, st, m.Count(), len(m.FreeList), m.HighWater, m.Allocs, m.Frees, m.Rejected, m.Drained)
	}
	if st.Live+st.Free != st.Capacity || st.Allocs-st.Frees != uint64(st.Live) {
		t.Fatalf("%s, op %d: stats %+v break Live+Free = Capacity or Allocs-Frees = Live", name, k, st)
	}
	if st.RemoteDrained > st.RemoteSubmitted || st.RemoteSubmitted > m.Submitted {
		t.Fatalf("%s, op %d: submitted %d, drained %d, the workers were given %d", name, k, st.RemoteSubmitted, st.RemoteDrained, m.Submitted)
	}
	var sum uint64
	for _, c := range st.DrainSizes {
		sum += c
	}
	if sum != st.Drains {
		t.Fatalf("%s, op %d: drain histogram sums to %d, Drains = %d", name, k, sum, st.Drains)
	}
}

// FuzzHandleUnmarshal checks that decoding never panics and that whatever
// decodes encodes back to the same bytes.
func FuzzHandleUnmarshal(f *testing.F) {
	f.Add(make([]byte, pool.HandleSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		var h pool.Handle
		if err := h.UnmarshalBinary(data); err != nil {
			if len(data) == pool.HandleSize {
				t.Fatalf("rejected %d bytes: %v", len(data), err)
			}
			return
		}
		back, _ := h.MarshalBinary()
		if string(back) != string(data) {
			t.Fatalf("round trip %x -> %x", data, back)
		}
		_ = h.String() // never panics
	})
}
