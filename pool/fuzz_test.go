package pool_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
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

// model is an obviously correct pool: a free list as a slice, generations
// in a slice, live handles in a map. FuzzOps runs the same operations on it
// and on a real pool and compares every result.
type model struct {
	id    uint32
	fifo  bool
	free  []int // front is index 0
	gen   []uint64
	live  map[pool.Handle]byte // owner-held handle -> byte written into its block
	sent  map[pool.Handle]int  // copies sent to workers and not yet delivered
	stale []pool.Handle        // handles whose block was freed since
	freed map[pool.Handle]bool // stale handles, for lookups

	allocs, frees, rejected, remote uint64
	// Rejections seen by drains and not yet reported by Drain.
	rejN     int
	rejFirst pool.Handle
}

func newModel(n int, fifo bool) *model {
	m := &model{fifo: fifo, gen: make([]uint64, n), live: map[pool.Handle]byte{},
		sent: map[pool.Handle]int{}, freed: map[pool.Handle]bool{}}
	for i := n - 1; i >= 0; i-- {
		m.free = append(m.free, i)
	}
	return m
}

func (m *model) valid(h pool.Handle) bool {
	i := h.Index()
	return poolID(h) == m.id && i < len(m.gen) && m.gen[i] == h.Generation() && h.Generation()&1 == 1
}

// release frees h as the pool must: it reports whether h was good.
func (m *model) release(h pool.Handle) bool {
	if !m.valid(h) {
		m.rejected++
		return false
	}
	m.gen[h.Index()]++
	m.free = append(m.free, h.Index())
	m.stale = append(m.stale, h)
	m.freed[h] = true
	m.frees++
	return true
}

// deliver replays chunks a drain delivered and returns how many it freed.
func (m *model) deliver(got []pool.Handle) int {
	freed := 0
	for _, h := range got {
		if m.sent[h]--; m.sent[h] == 0 {
			delete(m.sent, h)
		}
		if m.release(h) {
			freed++
			continue
		}
		if m.rejN == 0 {
			m.rejFirst = h
		}
		m.rejN++
	}
	return freed
}

func (m *model) take() pool.Handle {
	var i int
	if m.fifo {
		i, m.free = m.free[0], m.free[1:]
	} else {
		i, m.free = m.free[len(m.free)-1], m.free[:len(m.free)-1]
	}
	m.gen[i]++
	m.allocs++
	h := mkHandle(m.id, uint32(i), m.gen[i])
	return h
}

func (m *model) liveList() []pool.Handle {
	hs := make([]pool.Handle, 0, len(m.live))
	for h := range m.live {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b pool.Handle) int { return a.Index() - b.Index() })
	return hs
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

// FuzzOps decodes bytes into a pool combination (transport × backing ×
// policy, every one in the tree) and a sequence of operations, runs them on
// the pool, with remote frees done by real worker goroutines, and on the
// model, and compares every result and the accounting after every step.
// Delivery timing is the workers'; the model replays exactly what each drain
// delivered, so every allocation's block is predicted exactly.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 15})
	f.Add([]byte{9, 0, 0, 0, 0, 0x55, 0x25, 0, 0, 6, 15, 0x17, 6, 15})
	f.Add([]byte{17, 1, 1, 1, 1, 1, 1, 1, 1, 0x35, 0x75, 0x05, 0x47, 0x07, 12, 0, 6, 15})
	f.Add([]byte{3, 0, 0, 0x35, 10, 6, 11, 6, 13, 14, 8, 9, 15})
	f.Add([]byte{23, 0, 0, 0, 0, 0, 0, 0, 0, 0x75, 0x71, 0x65, 0x77, 6, 6, 15})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		const n = 8
		combo := int(ops[0])
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
		m := newModel(n, fifoOrder)
		first, err := p.Alloc() // learn the pool id; freed at once
		if err != nil {
			t.Fatal(err)
		}
		m.id = poolID(first)
		if want := m.take(); want != first {
			t.Fatalf("first Alloc = %v, model wants %v", first, want)
		}
		if err := p.Free(first); err != nil || !m.release(first) {
			t.Fatalf("first free: %v", err)
		}
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
		look := func() int {
			got := rec.got
			rec.got = rec.got[:0]
			return m.deliver(got)
		}
		// drain is the owner's Drain, checked against the model.
		drain := func(k int) {
			t.Helper()
			got, err := p.Drain()
			if want := look(); got != want {
				fail(k, "Drain freed %d, the model %d", got, want)
			}
			if m.rejN == 0 {
				if err != nil {
					fail(k, "Drain reported %v, the model saw no rejection", err)
				}
				return
			}
			var rej *pool.RejectedError
			if !errors.As(err, &rej) || rej.Rejected != m.rejN || rej.First != m.rejFirst {
				fail(k, "Drain reported %v; the model saw %d rejections, first %v", err, m.rejN, m.rejFirst)
			}
			m.rejN = 0
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

		for k, op := range ops[1:] {
			arg := int(op >> 4)
			switch op & 0xf {
			case 0, 1, 13: // Alloc, or AllocBytes
				var h pool.Handle
				var buf []byte
				var err error
				if op&0xf == 13 {
					h, buf, err = p.AllocBytes()
				} else {
					h, err = p.Alloc()
				}
				look()
				if len(m.free) == 0 {
					if !errors.Is(err, pool.ErrExhausted) {
						fail(k, "Alloc with nothing free in the model = %v, %v", h, err)
					}
					continue
				}
				if want := m.take(); err != nil || h != want {
					fail(k, "Alloc = %v, %v; model wants %v", h, err, want)
				}
				if buf == nil {
					buf, err = p.Bytes(h)
					if err != nil {
						fail(k, "Bytes of a new handle: %v", err)
					}
				}
				buf[0] = byte(k)
				m.live[h] = byte(k)
			case 2: // local free of a live handle
				hs := m.liveList()
				if len(hs) == 0 {
					continue
				}
				h := hs[arg%len(hs)]
				if err := p.Free(h); err != nil {
					fail(k, "Free(%v) = %v", h, err)
				}
				delete(m.live, h)
				m.release(h)
			case 3: // stale free
				if len(m.stale) == 0 {
					continue
				}
				h := m.stale[arg%len(m.stale)]
				if err := p.Free(h); !errors.Is(err, pool.ErrStaleHandle) {
					fail(k, "stale Free(%v) = %v", h, err)
				}
				m.rejected++
			case 4: // Bytes of live and stale handles
				for h, v := range m.live {
					buf, err := p.Bytes(h)
					if err != nil || buf[0] != v {
						fail(k, "Bytes(%v) = %v, %v; want first byte %d", h, buf, err, v)
					}
				}
				if len(m.stale) > 0 {
					h := m.stale[arg%len(m.stale)]
					if _, err := p.Bytes(h); !errors.Is(err, pool.ErrStaleHandle) {
						fail(k, "Bytes of stale %v = %v", h, err)
					}
					m.rejected++
				}
			case 5: // remote free of up to 8 live handles by a worker
				hs := m.liveList()
				hs = hs[:min(len(hs), arg%8+1)]
				if len(hs) == 0 {
					continue
				}
				for _, h := range hs {
					delete(m.live, h)
					m.sent[h]++
				}
				m.remote += uint64(len(hs))
				dispatch(k, arg%fuzzWorkers, slices.Clone(hs))
			case 6: // Drain
				drain(k)
			case 7: // all-or-nothing chunk allocation
				dst := make([]pool.Handle, arg%5+1)
				err := p.AllocChunk(dst)
				look()
				if len(m.free) < len(dst) {
					if !errors.Is(err, pool.ErrExhausted) {
						fail(k, "AllocChunk(%d) with %d free in the model = %v", len(dst), len(m.free), err)
					}
					continue
				}
				if err != nil {
					fail(k, "AllocChunk(%d) with %d free: %v", len(dst), len(m.free), err)
				}
				for _, h := range dst {
					if want := m.take(); h != want {
						fail(k, "AllocChunk gave %v, model wants %v", h, want)
					}
					buf, err := p.Bytes(h)
					if err != nil {
						fail(k, "Bytes: %v", err)
					}
					buf[0] = byte(k)
					m.live[h] = byte(k)
				}
			case 8: // forged handles: zero, out of range, foreign, forged generation
				for _, c := range []struct {
					h    pool.Handle
					want error
				}{
					{pool.Handle{}, pool.ErrZeroHandle},
					{mkHandle(m.id, n+uint32(arg), 1), pool.ErrOutOfRange},
					{mkHandle(m.id^0x80000000, 0, 1), pool.ErrForeignHandle},
					{mkHandle(m.id, uint32(arg%n), m.gen[arg%n]+2), pool.ErrStaleHandle},
				} {
					if err := p.Free(c.h); !errors.Is(err, c.want) {
						fail(k, "Free(%v) = %v, want %v", c.h, err, c.want)
					}
					m.rejected++
				}
			case 9: // local FreeChunk mixing live and stale handles
				hs := m.liveList()
				hs = hs[:min(len(hs), arg%3+1)]
				chunk := slices.Clone(hs)
				bad := 0
				if len(m.stale) > 0 {
					chunk = append(chunk, m.stale[arg%len(m.stale)])
					bad = 1
				}
				err := p.FreeChunk(chunk)
				if (bad == 0) != (err == nil) {
					fail(k, "FreeChunk with %d bad = %v", bad, err)
				}
				for _, h := range hs {
					delete(m.live, h)
					m.release(h)
				}
				m.rejected += uint64(bad)
			case 10: // local free of a handle a worker is freeing too: the drain rejects one
				var hs []pool.Handle
				for h := range m.sent {
					if m.valid(h) {
						hs = append(hs, h)
					}
				}
				if len(hs) == 0 {
					continue
				}
				slices.SortFunc(hs, func(a, b pool.Handle) int { return a.Index() - b.Index() })
				h := hs[arg%len(hs)]
				if err := p.Free(h); err != nil {
					fail(k, "Free of an undelivered remote free %v = %v", h, err)
				}
				m.release(h)
			case 11: // a worker frees a stale handle
				if len(m.stale) == 0 {
					continue
				}
				h := m.stale[arg%len(m.stale)]
				m.sent[h]++
				m.remote++
				dispatch(k, arg%fuzzWorkers, []pool.Handle{h})
			case 12: // a worker retires its sender and opens a new one
				dispatch(k, arg%fuzzWorkers, nil)
			case 14: // Snapshot after Stats agrees with Stats (workers may have submitted since)
				st := p.Stats()
				snap := p.Snapshot()
				if snap.RemoteSubmitted < st.RemoteSubmitted {
					fail(k, "Snapshot submitted %d < Stats submitted %d", snap.RemoteSubmitted, st.RemoteSubmitted)
				}
				snap.RemoteSubmitted = st.RemoteSubmitted
				if snap != st {
					fail(k, "Snapshot %+v after Stats %+v", snap, st)
				}
			case 15: // exact accounting now
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
			look()
			if n == 0 && got == 0 {
				break
			}
		}
		if len(m.sent) != 0 {
			t.Fatalf("%s: %d handles sent were never delivered: %v", tc.name, len(m.sent), m.sent)
		}
		st := p.Stats()
		if st.RemoteSubmitted != m.remote || st.RemoteDrained != m.remote {
			t.Fatalf("%s: submitted %d, drained %d, the workers sent %d", tc.name, st.RemoteSubmitted, st.RemoteDrained, m.remote)
		}
		checkStats(t, len(ops), tc.name, st, m)
		// The free list is intact: everything free comes out in model order.
		for len(m.free) > 0 {
			h, err := p.Alloc()
			if want := m.take(); err != nil || h != want {
				t.Fatalf("%s: final Alloc = %v, %v; model wants %v", tc.name, h, err, want)
			}
		}
		if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
			t.Fatalf("%s: Alloc with every block live = %v", tc.name, err)
		}
	})
}

// checkStats compares the pool's accounting with the model's.
func checkStats(t *testing.T, k int, name string, st pool.Stats, m *model) {
	t.Helper()
	live := 0
	for i := range m.gen {
		if m.gen[i]&1 == 1 {
			live++
		}
	}
	if st.Live != live || st.Free != len(m.free) || st.Allocs != m.allocs || st.Frees != m.frees || st.Rejected != m.rejected {
		t.Fatalf("%s, op %d: stats %+v; model live %d free %d allocs %d frees %d rejected %d",
			name, k, st, live, len(m.free), m.allocs, m.frees, m.rejected)
	}
	if st.Live+st.Free != st.Capacity || st.Allocs-st.Frees != uint64(st.Live) {
		t.Fatalf("%s, op %d: stats %+v break Live+Free = Capacity or Allocs-Frees = Live", name, k, st)
	}
	if st.RemoteDrained > st.RemoteSubmitted || st.RemoteSubmitted > m.remote {
		t.Fatalf("%s, op %d: submitted %d, drained %d, the workers were given %d", name, k, st.RemoteSubmitted, st.RemoteDrained, m.remote)
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
