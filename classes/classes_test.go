package classes_test

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

func newDefault(t testing.TB, cs []classes.Class) *classes.DefaultPool {
	t.Helper()
	c, err := classes.Default(cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bigBudget is 2^40 bytes, or the largest int where int has 32 bits.
var bigBudget = int(min(uint64(math.MaxInt), 1<<40))

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		name    string
		budget  int
		sizes   []int
		weights []int
		want    []classes.Class
	}{
		{"equal bytes", 1 << 20, []int{4096, 65536}, nil, []classes.Class{{4096, 128}, {65536, 8}}},
		{"weighted", 1 << 20, []int{4096, 65536}, []int{1, 3}, []classes.Class{{4096, 64}, {65536, 12}}},
		{"rounds down", 1000, []int{300, 100}, nil, []classes.Class{{300, 1}, {100, 5}}},
		// 2^40 bytes (2^31-1 on 32-bit platforms) at weight 2^30: the
		// product overflows 64 bits where int has them.
		{"budget × weight overflows", bigBudget, []int{1 << 20}, []int{1 << 30}, []classes.Class{{1 << 20, bigBudget >> 20}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := classes.Split(c.budget, c.sizes, c.weights)
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("Split = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	for _, c := range []struct {
		name    string
		budget  int
		sizes   []int
		weights []int
	}{
		{"zero budget", 0, []int{64}, nil},
		{"no sizes", 1024, nil, nil},
		{"zero size", 1024, []int{0}, nil},
		{"weights of another length", 1024, []int{64, 128}, []int{1}},
		{"zero weight", 1024, []int{64, 128}, []int{1, 0}},
		{"share below one block", 1024, []int{64, 2048}, nil},
		{"too many classes", 1 << 30, make([]int, classes.MaxClasses+1), nil},
		{"classes past any pool", math.MaxInt, []int{1, 4096}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := classes.Split(c.budget, c.sizes, c.weights); !errors.Is(err, pool.ErrInvalidConfig) {
				t.Fatalf("Split = %v, %v; want pool.ErrInvalidConfig", got, err)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	build := func(c classes.Class) (*heap.Backing, *mailbox.Transport, lifo.Policy, error) {
		b, err := heap.New(c.Size, c.Blocks)
		return b, mailbox.New(), lifo.Policy{}, err
	}
	for _, c := range []struct {
		name  string
		cs    []classes.Class
		build func(classes.Class) (*heap.Backing, *mailbox.Transport, lifo.Policy, error)
	}{
		{"no classes", nil, build},
		{"nil build", []classes.Class{{64, 1}}, nil},
		{"zero size", []classes.Class{{0, 1}}, build},
		{"zero blocks", []classes.Class{{64, 0}}, build},
		{"duplicate sizes", []classes.Class{{64, 1}, {128, 1}, {64, 2}}, build},
		{"too many", make([]classes.Class, classes.MaxClasses+1), build},
		{"build fails", []classes.Class{{64, 1}, {128, 1}}, func(c classes.Class) (*heap.Backing, *mailbox.Transport, lifo.Policy, error) {
			if c.Size == 128 {
				return nil, nil, lifo.Policy{}, pool.ErrInvalidConfig
			}
			return build(c)
		}},
		{"typed nil backing", []classes.Class{{64, 1}}, func(classes.Class) (*heap.Backing, *mailbox.Transport, lifo.Policy, error) {
			return nil, mailbox.New(), lifo.Policy{}, nil
		}},
		{"build ignores the class", []classes.Class{{64, 4}}, func(classes.Class) (*heap.Backing, *mailbox.Transport, lifo.Policy, error) {
			return build(classes.Class{Size: 32, Blocks: 4})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := classes.New(c.cs, c.build)
			if !errors.Is(err, pool.ErrInvalidConfig) || p != nil {
				t.Fatalf("New = %v, %v; want pool.ErrInvalidConfig", p, err)
			}
		})
	}
}

func TestZeroPool(t *testing.T) {
	var c classes.DefaultPool
	if _, err := c.Alloc(1); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Alloc = %v", err)
	}
	if err := c.Free(classes.Handle{}); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Free = %v", err)
	}
	if err := c.FreeChunk(nil); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("FreeChunk = %v", err)
	}
	if _, err := c.Drain(); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Drain = %v", err)
	}
	if _, err := c.NewSender(); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("NewSender = %v", err)
	}
	if err := c.Close(); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Close = %v", err)
	}
	var s classes.Sender
	if err := s.Free(classes.Handle{}); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("zero Sender Free = %v", err)
	}
	if len(c.Stats().Classes) != 0 || len(c.Snapshot().Classes) != 0 {
		t.Error("a zero Pool has classes")
	}
}

func TestAllocClassAndStats(t *testing.T) {
	c := newDefault(t, []classes.Class{{Size: 100, Blocks: 2}, {Size: 1000, Blocks: 2}})
	if k, err := c.ClassOf(101); k != 1 || err != nil {
		t.Fatalf("ClassOf(101) = %d, %v", k, err)
	}
	if _, err := c.ClassOf(1001); !errors.Is(err, classes.ErrTooLarge) {
		t.Fatalf("ClassOf(1001) = %v", err)
	}
	a, _ := c.Alloc(50)
	b, _ := c.Alloc(100)
	if _, err := c.Alloc(1); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("Alloc with class 0 full = %v (no fallback to a larger class)", err)
	}
	d, err := c.AllocClass(1, 1) // the caller's own fallback
	if err != nil || d.Class() != 1 {
		t.Fatalf("AllocClass = %v, %v", d, err)
	}
	if _, err := c.AllocClass(0, 101); !errors.Is(err, pool.ErrInvalidArgument) {
		t.Fatalf("AllocClass(0, 101) = %v", err)
	}
	st := c.Stats()
	if st.Classes[0].Requested != 150 || st.Classes[0].HandedOut() != 200 || st.Classes[1].Requested != 1 || st.Live() != 3 {
		t.Fatalf("stats %+v", st)
	}
	if got, want := st.InternalFragmentation(), 1-151.0/1200; got != want {
		t.Fatalf("internal fragmentation %v, want %v", got, want)
	}
	if got := st.Classes[0].InternalFragmentation(); got != 0.25 {
		t.Fatalf("class 0 internal fragmentation %v", got)
	}
	for _, h := range []classes.Handle{a, b, d} {
		if err := c.Free(h); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := c.Class(1); err != nil || p.BlockSize() != 1000 {
		t.Fatalf("Class(1) = %v, %v", p, err)
	}
	if got := c.Classes(); !slices.Equal(got, []classes.Class{{100, 2}, {1000, 2}}) {
		t.Fatalf("Classes = %v", got)
	}
}

// TestRemoteRace frees blocks of every class from worker goroutines that
// write into them first, while the owner drains and a scraper reads
// Snapshot; run it with -race.
func TestRemoteRace(t *testing.T) {
	c := newDefault(t, []classes.Class{{Size: 64, Blocks: 256}, {Size: 512, Blocks: 128}, {Size: 4096, Blocks: 64}})
	const workers, rounds = 4, 50
	stop := make(chan struct{})
	var scraper sync.WaitGroup
	scraper.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, cs := range c.Snapshot().Classes {
				if cs.Live+cs.Free != cs.Capacity || cs.Requested > cs.HandedOut() {
					t.Errorf("inconsistent snapshot %+v", cs)
					return
				}
			}
		}
	})
	senders := make([]*classes.Sender, workers)
	for i := range senders {
		senders[i], _ = c.NewSender()
	}
	for round := range rounds {
		var reqs [workers][]classes.Handle
		for w := range workers {
			for i := range 20 {
				h, err := c.Alloc(1 + (round*7+w*13+i*29)%4096)
				if err != nil {
					t.Fatal(err)
				}
				reqs[w] = append(reqs[w], h)
			}
		}
		var wg sync.WaitGroup
		for w := range workers {
			bufs := make([][]byte, len(reqs[w]))
			for i, h := range reqs[w] {
				bufs[i], _ = c.Bytes(h)
			}
			wg.Go(func() {
				for _, b := range bufs {
					b[0] = byte(w) // the worker writes, then frees
				}
				if err := senders[w].FreeChunk(reqs[w]); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, err := c.Drain(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	scraper.Wait()
	st := c.Stats()
	if st.Live() != 0 {
		t.Fatalf("%d blocks still live", st.Live())
	}
	for _, cs := range st.Classes {
		if cs.RemoteSubmitted != cs.RemoteDrained || cs.Frees != cs.Allocs {
			t.Fatalf("class stats %+v", cs)
		}
	}
}

func TestSenderRejectsUnknownClass(t *testing.T) {
	c := newDefault(t, []classes.Class{{Size: 64, Blocks: 4}})
	s, _ := c.NewSender()
	h, _ := c.Alloc(8)
	err := s.FreeChunk([]classes.Handle{h, reclass(h, 5)})
	var re *pool.RejectedError
	if !errors.Is(err, classes.ErrUnknownClass) || !errors.Is(err, pool.ErrInvalidHandle) || !errors.As(err, &re) || re.Rejected != 1 {
		t.Fatalf("FreeChunk = %v", err)
	}
	if n, err := c.Drain(); n != 1 || err != nil {
		t.Fatalf("Drain = %d, %v; the good handle must come back", n, err)
	}
	if st := c.Stats(); st.Rejected != 1 || st.Live() != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Free(h); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Free on a closed sender = %v", err)
	}
}

func TestHandleBinary(t *testing.T) {
	c := newDefault(t, []classes.Class{{Size: 64, Blocks: 4}, {Size: 128, Blocks: 4}})
	h, _ := c.Alloc(100)
	data, _ := h.MarshalBinary()
	var back classes.Handle
	if err := back.UnmarshalBinary(data); err != nil || back != h || len(data) != classes.HandleSize {
		t.Fatalf("round trip of %v = %v, %v", h, back, err)
	}
	if err := back.UnmarshalBinary(data[1:]); !errors.Is(err, pool.ErrInvalidArgument) || back != h {
		t.Fatalf("short data: %v, %v", back, err)
	}
	if h.String() == "" || (classes.Handle{}).String() != "classes.Handle{}" || h.Block().IsZero() {
		t.Fatal(h.String())
	}
}

func FuzzHandleUnmarshal(f *testing.F) {
	f.Add(make([]byte, classes.HandleSize))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{7})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newDefault(t, []classes.Class{{Size: 16, Blocks: 2}, {Size: 32, Blocks: 2}})
		live, _ := c.Alloc(20)
		var h classes.Handle
		if err := h.UnmarshalBinary(data); err != nil {
			if len(data) == classes.HandleSize || !errors.Is(err, pool.ErrInvalidArgument) {
				t.Fatalf("UnmarshalBinary(%x) = %v", data, err)
			}
			return
		}
		if enc, _ := h.MarshalBinary(); string(enc) != string(data) {
			t.Fatalf("re-encoding %x gave %x", data, enc)
		}
		err := c.Free(h)
		if h == live {
			if err != nil {
				t.Fatalf("Free of the live handle decoded: %v", err)
			}
		} else if !errors.Is(err, pool.ErrInvalidHandle) {
			t.Fatalf("Free of forged %v = %v", h, err)
		}
	})
}

// TestNoAllocations pins the owner's and the sender's steady-state paths
// at zero allocations.
func TestNoAllocations(t *testing.T) {
	c := newDefault(t, []classes.Class{{Size: 64, Blocks: 64}, {Size: 256, Blocks: 64}, {Size: 1024, Blocks: 64}})
	s, _ := c.NewSender()
	chunk := make([]classes.Handle, 12)
	for name, f := range map[string]func(){
		"alloc+free": func() {
			h, _ := c.Alloc(200)
			_ = c.Free(h)
		},
		"allocbytes+free": func() {
			h, _, _ := c.AllocBytes(1000)
			_ = c.Free(h)
		},
		"freechunk": func() {
			for i := range chunk {
				chunk[i], _ = c.Alloc(1 + i*80)
			}
			_ = c.FreeChunk(chunk)
		},
		"sender+drain": func() {
			for i := range chunk {
				chunk[i], _ = c.Alloc(1 + i*80)
			}
			_ = s.FreeChunk(chunk)
			_, _ = c.Drain()
		},
		"rejected free": func() { _ = c.Free(classes.Handle{}) },
	} {
		f() // warm the per-class parts and the mailbox nodes
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times per run", name, n)
		}
	}
}

// TestNewSenderRace makes senders on other goroutines while the owner
// allocates, drains and closes; run it with -race.
func TestNewSenderRace(t *testing.T) {
	c, err := classes.Default([]classes.Class{{Size: 64, Blocks: 64}, {Size: 256, Blocks: 64}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				s, err := c.NewSender()
				if err != nil {
					if !errors.Is(err, pool.ErrClosed) {
						t.Error(err)
					}
					return
				}
				_ = s.Close()
			}
		})
	}
	for i := range 200 {
		h, _ := c.Alloc(1 + i%256)
		_ = c.Free(h)
		_, _ = c.Drain()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// reclass returns h with its class index replaced by k: a forged handle.
func reclass(h classes.Handle, k int) classes.Handle {
	b, _ := h.MarshalBinary()
	b[pool.HandleSize] = byte(k)
	var out classes.Handle
	_ = out.UnmarshalBinary(b)
	return out
}
