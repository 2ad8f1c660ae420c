package pool_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// model is an obviously correct pool: free lists as slices, generations in a
// map. FuzzOps runs the same operations on it and on a real pool.
type model struct {
	fifo  bool
	free  []int // front is index 0
	gen   map[int]uint64
	live  map[pool.Handle]byte // handle -> the byte written into its block
	stale []pool.Handle
	// remote frees sent but not drained, in send order
	inflight                []pool.Handle
	allocs, frees, rejected uint64
}

func newModel(n int, fifo bool) *model {
	m := &model{fifo: fifo, gen: map[int]uint64{}, live: map[pool.Handle]byte{}}
	for i := n - 1; i >= 0; i-- {
		m.free = append(m.free, i)
	}
	return m
}

// next is the index the pool must hand out next.
func (m *model) next() int {
	if m.fifo {
		return m.free[0]
	}
	return m.free[len(m.free)-1]
}

func (m *model) take() int {
	i := m.next()
	if m.fifo {
		m.free = m.free[1:]
	} else {
		m.free = m.free[:len(m.free)-1]
	}
	m.allocs++
	return i
}

func (m *model) drain() int {
	n := len(m.inflight)
	for _, h := range m.inflight {
		m.free = append(m.free, h.Index())
		m.stale = append(m.stale, h)
	}
	m.inflight = m.inflight[:0]
	m.frees += uint64(n)
	return n
}

// FuzzOps decodes bytes into operations, runs them on a pool of 8 blocks and
// on the model, and compares every result and the final accounting.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 4, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0x47, 0, 5, 0})
	f.Add([]byte{0, 0, 6, 3, 2, 2, 6, 3, 5, 7, 8, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		const n = 8
		fifoOrder := ops[0]&1 == 1
		var pol pool.ReusePolicy = lifo.Policy{}
		if fifoOrder {
			pol = fifo.Policy{}
		}
		b, _ := heap.New(16, n)
		p, err := pool.New(b, mailbox.New(), pol)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		snd, _ := p.NewSender()
		m := newModel(n, fifoOrder)
		liveList := func() []pool.Handle {
			hs := make([]pool.Handle, 0, len(m.live))
			for h := range m.live {
				hs = append(hs, h)
			}
			slices.SortFunc(hs, func(a, b pool.Handle) int { return a.Index() - b.Index() })
			return hs
		}
		for k, op := range ops[1:] {
			arg := int(op >> 4)
			switch op & 0xf {
			case 0, 1: // alloc
				h, err := p.Alloc()
				if len(m.free) == 0 && len(m.inflight) > 0 {
					m.drain() // the pool drains on exhaustion
				}
				if len(m.free) == 0 {
					if !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("op %d: Alloc on empty = %v, %v", k, h, err)
					}
					continue
				}
				want := m.take()
				if err != nil || h.Index() != want {
					t.Fatalf("op %d: Alloc = %v, %v; model wants block %d", k, h, err, want)
				}
				if _, dup := m.live[h]; dup {
					t.Fatalf("op %d: %v handed out twice", k, h)
				}
				buf, _ := p.Bytes(h)
				buf[0] = byte(k)
				m.live[h] = byte(k)
			case 2: // local free of a live handle
				hs := liveList()
				if len(hs) == 0 {
					continue
				}
				h := hs[arg%len(hs)]
				if err := p.Free(h); err != nil {
					t.Fatalf("op %d: Free(%v) = %v", k, h, err)
				}
				delete(m.live, h)
				m.free = append(m.free, h.Index())
				m.stale = append(m.stale, h)
				m.frees++
			case 3: // stale free
				if len(m.stale) == 0 {
					continue
				}
				h := m.stale[arg%len(m.stale)]
				if err := p.Free(h); !errors.Is(err, pool.ErrStaleHandle) {
					t.Fatalf("op %d: stale Free(%v) = %v", k, h, err)
				}
				m.rejected++
			case 4: // bytes of live and stale handles
				for h, v := range m.live {
					buf, err := p.Bytes(h)
					if err != nil || buf[0] != v {
						t.Fatalf("op %d: Bytes(%v) = %v, %v; want first byte %d", k, h, buf, err, v)
					}
				}
				if len(m.stale) > 0 {
					if _, err := p.Bytes(m.stale[arg%len(m.stale)]); !errors.Is(err, pool.ErrStaleHandle) {
						t.Fatalf("op %d: Bytes of stale = %v", k, err)
					}
					m.rejected++
				}
			case 5: // remote free of up to arg live handles
				hs := liveList()
				hs = hs[:min(len(hs), arg%4+1)]
				if err := snd.FreeChunk(hs); err != nil {
					t.Fatalf("op %d: sender FreeChunk: %v", k, err)
				}
				for _, h := range hs {
					delete(m.live, h)
				}
				m.inflight = append(m.inflight, hs...)
			case 6: // drain
				got, err := p.Drain()
				if want := m.drain(); got != want || err != nil {
					t.Fatalf("op %d: Drain = %d, %v; want %d", k, got, err, want)
				}
			case 7: // all-or-nothing chunk allocation
				dst := make([]pool.Handle, arg%5+1)
				err := p.AllocChunk(dst)
				if len(m.free) < len(dst) {
					m.drain()
				}
				if len(m.free) < len(dst) {
					if !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("op %d: AllocChunk(%d) with %d free = %v", k, len(dst), len(m.free), err)
					}
					continue
				}
				for _, h := range dst {
					if want := m.take(); h.Index() != want {
						t.Fatalf("op %d: AllocChunk gave block %d, model wants %d", k, h.Index(), want)
					}
					m.live[h] = 0
					buf, _ := p.Bytes(h)
					buf[0] = 0
				}
			case 8: // forged handles
				if err := p.Free(pool.Handle{}); !errors.Is(err, pool.ErrZeroHandle) {
					t.Fatalf("op %d: Free(zero) = %v", k, err)
				}
				m.rejected++
			case 9: // local chunk free mixing live and stale handles
				hs := liveList()
				hs = hs[:min(len(hs), arg%3+1)]
				chunk := slices.Clone(hs)
				bad := 0
				if len(m.stale) > 0 {
					chunk = append(chunk, m.stale[arg%len(m.stale)])
					bad = 1
				}
				err := p.FreeChunk(chunk)
				if (bad == 0) != (err == nil) {
					t.Fatalf("op %d: FreeChunk with %d bad = %v", k, bad, err)
				}
				for _, h := range hs {
					delete(m.live, h)
					m.free = append(m.free, h.Index())
					m.stale = append(m.stale, h)
					m.frees++
				}
				m.rejected += uint64(bad)
			}
		}
		st := p.Stats()
		live := len(m.live) + len(m.inflight)
		if st.Live != live || st.Free != len(m.free) || st.Allocs != m.allocs || st.Frees != m.frees || st.Rejected != m.rejected {
			t.Fatalf("stats %+v; model live %d free %d allocs %d frees %d rejected %d",
				st, live, len(m.free), m.allocs, m.frees, m.rejected)
		}
	})
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
	})
}
