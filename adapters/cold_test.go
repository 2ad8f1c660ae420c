package adapters_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
)

// coldTier builds a cold tier of slots blocks of bs bytes, on disk (a
// file in a temporary directory, returned) or in host memory, closed and
// checked after the test's Manager (register it before newFixture).
func coldTier(t testing.TB, onDisk bool, bs, slots int, opts ...tier.Option) (*tier.Manager, string) {
	t.Helper()
	var st tier.Storage
	path := ""
	if onDisk {
		path = filepath.Join(t.TempDir(), "adapters.tier")
		d, err := disk.Open(path, bs, slots)
		if err != nil {
			t.Fatal(err)
		}
		st = d
	} else {
		h, err := host.New(bs, slots, host.WithHeap())
		if err != nil {
			t.Fatal(err)
		}
		st = h
	}
	tm, err := tier.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tm.Check(); err != nil {
			t.Errorf("tier Check at cleanup: %v", err)
		}
		_ = tm.Close()
	})
	return tm, path
}

// settle drains until no prefetch and no cold store is in flight.
func settle(t testing.TB, m *adapters.Manager) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := m.Drain(nil); err != nil {
			t.Fatal(err)
		}
		if s := m.Stats(); s.Loading == 0 && s.ColdStoring == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("copies still in flight: %+v", m.Stats())
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// fp16Weights returns n bytes of finite fp16 weights for adapter id, which
// an int8 warm tier can compress.
func fp16Weights(id string, n int) []byte {
	seed := weights(id, 8)
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed), 7))
	b := make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		binary.LittleEndian.PutUint16(b[i:], adapters.FP16.Encode16(rng.NormFloat64()/10))
	}
	return b
}

// loaderOf serves w and counts its loads.
type loaderOf struct {
	w     []byte
	mu    sync.Mutex
	loads int
}

func (l *loaderOf) Size() int64 { return int64(len(l.w)) }
func (l *loaderOf) Load(dst []byte) (int, error) {
	l.mu.Lock()
	l.loads++
	l.mu.Unlock()
	return copy(dst, l.w), nil
}
func (l *loaderOf) count() int { l.mu.Lock(); defer l.mu.Unlock(); return l.loads }

// get acquires id, checks its bytes against want and releases it.
func get(t testing.TB, m *adapters.Manager, id string, want []byte) {
	t.Helper()
	h, err := m.Acquire(id)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", id, err)
	}
	b, err := m.Bytes(h)
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("Acquire(%q): wrong bytes (%v)", id, err)
	}
	if err := m.Release(h); err != nil {
		t.Fatal(err)
	}
}

// roundTrip is the weights an int8 warm copy of w dequantizes to.
func roundTrip(t testing.TB, q adapters.Quant, w []byte) []byte {
	t.Helper()
	_, out := encodeDecode(t, q, w)
	return out
}

func TestWithColdRejects(t *testing.T) {
	open, _ := coldTier(t, false, 4096, 4)
	closed, _ := coldTier(t, false, 4096, 4)
	_ = closed.Close()
	var nilTier *tier.Manager
	for _, c := range []struct {
		name  string
		t     *tier.Manager
		admit int
	}{
		{"nil tier", nil, 1},
		{"typed nil tier", nilTier, 1},
		{"zero tier", &tier.Manager{}, 1},
		{"closed tier", closed, 1},
		{"admit 0", open, 0},
		{"admit negative", open, -2},
		{"admit too many", open, 1<<20 + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 8)
			if _, err := adapters.New(f.hot, adapterContent, adapters.WithCold(c.t, c.admit)); !errors.Is(err, pool.ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestColdTier runs the cold tier's life cycle on every geometry: an
// adapter loaded admitAfter times goes cold into the tier (its last copy
// leaving the hot tier, or the warm one), the next load reads the tier,
// never the Loader, and serves the exact bytes (or the warm int8 copy's).
func TestColdTier(t *testing.T) {
	q := adapters.Quant{Format: adapters.FP16, Group: 64}
	for _, c := range []struct {
		name   string
		disk   bool
		bs     int
		size   int // adapter bytes
		admit  int
		warm   bool
		quant  bool
		prefet bool // load back with Prefetch instead of Acquire
	}{
		{"host, blocks of a page", false, 4096, 5 * 4096, 1, false, false, false},
		{"host, tail block overhangs the run", false, 3000, 10000, 1, false, false, false},
		{"host, one block larger than the adapter", false, 1 << 16, 9000, 1, false, false, false},
		{"disk, exact", true, 4096, 6*4096 + 17, 1, false, false, false},
		{"disk, admit after 2", true, 8192, 30000, 2, false, false, false},
		{"disk, from the warm tier", true, 4096, 20000, 1, true, false, false},
		{"disk, int8 warm copies", true, 4096, 20000, 1, true, true, false},
		{"disk, prefetch", true, 3000, 10000, 1, false, false, true},
		{"disk, prefetch of an int8 copy", true, 4096, 20000, 1, true, true, true},
		{"host, prefetch, blocks split in parts", false, 1024, 20000, 1, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm, _ := coldTier(t, c.disk, c.bs, 64)
			opts := []adapters.Option{adapters.WithHotBudget(1, 0), adapters.WithCold(tm, c.admit), adapters.WithPolicy(adapters.LRU{})}
			if c.warm {
				// Room for one warm copy: the next one pushes it out, to cold.
				opts = append(opts, adapters.WithWarm(int64(c.size)+4096, 1, 4096))
			}
			if c.quant {
				opts = append(opts, adapters.WithQuantization(q, 0))
			}
			f := newFixture(t, 64, opts...)
			ids := []string{"a", "b", "c"}
			ws := map[string][]byte{}
			ls := map[string]*loaderOf{}
			for _, id := range ids {
				ws[id] = fp16Weights(id, c.size)
				ls[id] = &loaderOf{w: ws[id]}
				if err := f.m.Register(id, ls[id]); err != nil {
					t.Fatal(err)
				}
			}
			wa, la := ws["a"], ls["a"]
			served := wa
			if c.quant {
				served = roundTrip(t, q, wa)
			}
			// Every acquire demotes the adapter acquired before: without a
			// warm tier a goes cold when b is acquired, with one when c's
			// demotion pushes a's warm copy out (LRU).
			for round := range c.admit {
				for _, id := range ids {
					f.clk.advance(time.Second) // LRU ranks by last use
					get(t, f.m, id, ws[id])
				}
				settle(t, f.m)
				f.check(t)
				if s := f.m.Stats(); round < c.admit-1 && (s.ColdTierStores != 0 || s.ColdTierRejected == 0) {
					t.Fatalf("round %d: stored before admission: %+v", round, s)
				}
			}
			s := f.m.Stats()
			if r, _ := f.m.Residency("a"); r != adapters.Cold || s.ColdTierStores == 0 || s.ColdTier.Adapters < 1 {
				t.Fatalf("a is %v, stats %+v: not stored in the cold tier", r, s)
			}
			wantLen := c.size
			if c.quant {
				wantLen = q.EncodedSize(c.size)
			}
			if s.ColdTier.Bytes < int64(wantLen) || s.ColdTier.Pages < (wantLen+c.bs-1)/c.bs {
				t.Fatalf("cold tier counts %+v for a copy of %d bytes", s.ColdTier, wantLen)
			}
			loads := la.count()
			if c.prefet {
				if err := f.m.Prefetch("a"); err != nil {
					t.Fatal(err)
				}
				if d := waitDone(t, f.m, 1); d[0].Err != nil {
					t.Fatal(d[0].Err)
				}
			}
			get(t, f.m, "a", served)
			s2 := f.m.Stats()
			if la.count() != loads || s2.ColdTierLoads != s.ColdTierLoads+1 || s2.ColdTierErrors != 0 {
				t.Fatalf("the load back read the Loader (%d → %d loads) or not the tier: %+v", loads, la.count(), s2)
			}
			settle(t, f.m)
			f.check(t)
		})
	}
}

// TestColdAdmission: an adapter loaded fewer than admitAfter times goes
// cold unstored, and so does one larger than the whole tier (never
// admitted, whatever its loads); both keep working from the Loader.
func TestColdAdmission(t *testing.T) {
	tm, _ := coldTier(t, false, 4096, 3) // 12 KiB: smaller than "big"
	f := newFixture(t, 32, adapters.WithHotBudget(1, 0), adapters.WithCold(tm, 3))
	small, big := weights("small", 8000), weights("big", 5*4096)
	for _, r := range []struct {
		id string
		w  []byte
	}{{"small", small}, {"big", big}} {
		if err := f.m.Register(r.id, &loaderOf{w: r.w}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 1; round <= 5; round++ {
		get(t, f.m, "small", small)
		get(t, f.m, "big", big) // small goes cold
		get(t, f.m, "small", small)
		settle(t, f.m)
		s := f.m.Stats()
		if stored := s.ColdTier.Adapters; (round < 3 && stored != 0) || (round >= 3 && stored != 1) {
			t.Fatalf("round %d (small loaded %d times): %d cold copies, %+v", round, 2*round, stored, s)
		}
		f.check(t)
	}
	s := f.m.Stats()
	if s.ColdTierStores != 1 || s.ColdTierRejected == 0 || s.ColdTierLoads == 0 {
		t.Fatalf("stats %+v", s)
	}
	// big never admitted: at most one cold copy (small's) was ever made,
	// and big's loads all read the Loader.
	if ts := tm.Stats(); ts.Stores != 2 {
		t.Fatalf("tier stored %d blocks, want small's 2", ts.Stores)
	}
}

// failingStorage fails every write while fail is set.
type failingStorage struct {
	tier.Storage
	mu   sync.Mutex
	fail bool
}

func (s *failingStorage) WriteSlot(slot int, k tier.Key, gen uint64, src []byte) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return errors.New("write refused")
	}
	return s.Storage.WriteSlot(slot, k, gen, src)
}

func (s *failingStorage) set(fail bool) { s.mu.Lock(); s.fail = fail; s.mu.Unlock() }

// TestColdStoreFails: a store the tier fails stores nothing; the adapter
// loads from its Loader, and is stored on a later trip to cold.
func TestColdStoreFails(t *testing.T) {
	h, err := host.New(4096, 16, host.WithHeap())
	if err != nil {
		t.Fatal(err)
	}
	st := &failingStorage{Storage: h, fail: true}
	tm, err := tier.New(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	f := newFixture(t, 32, adapters.WithHotBudget(1, 0), adapters.WithCold(tm, 1))
	wa, wb := weights("a", 10000), weights("b", 10000)
	la := &loaderOf{w: wa}
	_ = f.m.Register("a", la)
	_ = f.m.Register("b", &loaderOf{w: wb})
	get(t, f.m, "a", wa)
	get(t, f.m, "b", wb) // a goes cold: its store fails
	settle(t, f.m)
	if s := f.m.Stats(); s.ColdTierErrors != 1 || s.ColdTier.Adapters != 0 || s.ColdTierStores != 0 {
		t.Fatalf("after a failed store: %+v", s)
	}
	f.check(t)
	get(t, f.m, "a", wa) // from the Loader; b's store fails too
	settle(t, f.m)
	if la.count() != 2 {
		t.Fatalf("a loaded %d times from its Loader, want 2", la.count())
	}
	st.set(false)
	get(t, f.m, "b", wb) // a goes cold again: stored now
	settle(t, f.m)
	get(t, f.m, "a", wa)
	if s := f.m.Stats(); s.ColdTierStores < 1 || s.ColdTierLoads != 1 || s.ColdTierErrors != 2 || la.count() != 2 {
		t.Fatalf("after a good store: %+v, %d Loader loads", s, la.count())
	}
	f.check(t)
	if err := tm.Check(); err != nil {
		t.Fatal(err)
	}
}

// corrupt changes the disk tier's file where the block holding needle is:
// flip one payload byte, tear the payload's second half (zeros, as a write
// cut short leaves it), or zero the slot's header.
func corrupt(t *testing.T, path string, needle []byte, bs int, how string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(b, needle)
	if off < 0 {
		t.Fatal("block not found in the tier's file")
	}
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	switch how {
	case "flip":
		_, err = fd.WriteAt([]byte{b[off+len(needle)/2] ^ 0x5A}, int64(off+len(needle)/2))
	case "torn":
		_, err = fd.WriteAt(make([]byte, len(needle)/2), int64(off+len(needle)-len(needle)/2))
	case "header":
		span := (bs + 4095) / 4096 * 4096
		_, err = fd.WriteAt(make([]byte, 64), int64(off+span))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestColdCorrupt: a torn or corrupt slot under the disk tier is never
// served: the load from the tier fails, the Loader serves the exact
// weights, the copy is dropped and stored again on the next trip to cold.
func TestColdCorrupt(t *testing.T) {
	for _, how := range []string{"flip", "torn", "header"} {
		for _, prefetch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/prefetch=%v", how, prefetch), func(t *testing.T) {
				const bs, size = 4096, 5*4096 + 100
				tm, path := coldTier(t, true, bs, 16)
				f := newFixture(t, 32, adapters.WithHotBudget(1, 0), adapters.WithCold(tm, 1))
				wa, wb := weights("a", size), weights("b", size)
				la := &loaderOf{w: wa}
				_ = f.m.Register("a", la)
				_ = f.m.Register("b", &loaderOf{w: wb})
				get(t, f.m, "a", wa)
				get(t, f.m, "b", wb) // a goes to the disk tier
				settle(t, f.m)
				if s := f.m.Stats(); s.ColdTier.Adapters != 1 {
					t.Fatalf("a not stored: %+v", s)
				}
				corrupt(t, path, wa[2*bs:3*bs], bs, how) // a's third block
				if prefetch {
					if err := f.m.Prefetch("a"); err != nil {
						t.Fatal(err)
					}
					if d := waitDone(t, f.m, 1); d[0].Err != nil {
						t.Fatal(d[0].Err)
					}
				}
				get(t, f.m, "a", wa) // b goes cold: stored
				settle(t, f.m)
				s := f.m.Stats()
				if s.ColdTierErrors != 1 || s.ColdTierLoads != 0 || la.count() != 2 || s.ColdTier.Adapters != 1 {
					t.Fatalf("after a corrupt block: %+v, %d Loader loads", s, la.count())
				}
				f.check(t)
				// The corrupt block dropped by the tier, a's others removed:
				// only b's 6 blocks remain.
				if ts := tm.Stats(); ts.LoadFailures != 1 || ts.Evictable != 6 {
					t.Fatalf("tier after the failed load: %+v", ts)
				}
				get(t, f.m, "b", wb) // from the tier; a goes cold again: stored anew
				settle(t, f.m)
				get(t, f.m, "a", wa)
				if s := f.m.Stats(); s.ColdTierLoads != 2 || la.count() != 2 {
					t.Fatalf("after storing again: %+v, %d Loader loads", s, la.count())
				}
				f.check(t)
			})
		}
	}
}

// TestColdReregister: an id registered again with other weights is never
// served its old cold copy, whether the old copy was stored or still being
// stored when it was unregistered; Unregister removes the old blocks.
func TestColdReregister(t *testing.T) {
	for _, inFlight := range []bool{false, true} {
		t.Run(fmt.Sprintf("store in flight=%v", inFlight), func(t *testing.T) {
			tm, _ := coldTier(t, true, 4096, 32)
			f := newFixture(t, 32, adapters.WithHotBudget(1, 0), adapters.WithCold(tm, 1))
			w1, w2, wb := weights("a1", 9000), weights("a2", 9000), weights("b", 9000)
			_ = f.m.Register("a", &loaderOf{w: w1})
			_ = f.m.Register("b", &loaderOf{w: wb})
			get(t, f.m, "a", w1)
			get(t, f.m, "b", wb) // a's store starts
			if !inFlight {
				settle(t, f.m)
			}
			if err := f.m.Unregister("a"); err != nil {
				t.Fatal(err)
			}
			l2 := &loaderOf{w: w2}
			if err := f.m.Register("a", l2); err != nil {
				t.Fatal(err)
			}
			get(t, f.m, "a", w2)
			settle(t, f.m)
			f.check(t)
			// Only b's blocks may remain: a's old ones were removed.
			if s, ts := f.m.Stats(), tm.Stats(); ts.Evictable > 3 || s.ColdTier.Adapters > 1 {
				t.Fatalf("old blocks remain: tier %+v, stats %+v", ts, s)
			}
			get(t, f.m, "b", wb) // a (new) goes cold: stored under new keys
			settle(t, f.m)
			get(t, f.m, "a", w2)
			if s := f.m.Stats(); s.ColdTierLoads == 0 || l2.count() != 1 {
				t.Fatalf("new a not served from the tier: %+v, %d Loader loads", s, l2.count())
			}
			f.check(t)
		})
	}
}

// TestColdEviction: the tier holds one adapter; storing the second evicts
// the first's blocks, which is then forgotten (loaded from its Loader).
func TestColdEviction(t *testing.T) {
	tm, _ := coldTier(t, false, 4096, 3)
	f := newFixture(t, 32, adapters.WithHotBudget(1, 0), adapters.WithCold(tm, 1))
	wa, wb, wc := weights("a", 12000), weights("b", 12000), weights("c", 12000)
	la := &loaderOf{w: wa}
	_ = f.m.Register("a", la)
	_ = f.m.Register("b", &loaderOf{w: wb})
	_ = f.m.Register("c", &loaderOf{w: wc})
	get(t, f.m, "a", wa)
	get(t, f.m, "b", wb) // a stored
	settle(t, f.m)
	get(t, f.m, "c", wc) // b stored, evicting a
	settle(t, f.m)
	s := f.m.Stats()
	if s.ColdTierEvictions != 1 || s.ColdTier.Adapters != 1 || s.ColdTierStores != 2 {
		t.Fatalf("stats %+v", s)
	}
	f.check(t)
	get(t, f.m, "a", wa) // evicted: from the Loader
	if s := f.m.Stats(); la.count() != 2 || s.ColdTierLoads != 0 {
		t.Fatalf("a loaded %d times from its Loader, want 2; %+v", la.count(), s)
	}
	settle(t, f.m)
	f.check(t)
}

// storingA makes a Manager with one hot adapter over the cold tier tm,
// registers adapters a and b of size bytes each and acquires a, then b: b
// takes a's place, and a's store to the tier is in flight.
func storingA(t *testing.T, tm *tier.Manager, size int) (f *fixture, wa, wb []byte) {
	t.Helper()
	f = newFixture(t, 32, adapters.WithHotBudget(1, 0), adapters.WithCold(tm, 1))
	wa, wb = weights("a", size), weights("b", size)
	_ = f.m.Register("a", &loaderOf{w: wa})
	_ = f.m.Register("b", &loaderOf{w: wb})
	get(t, f.m, "a", wa)
	get(t, f.m, "b", wb) // a's store in flight
	return f, wa, wb
}

// TestColdTierClosed: a tier closed under the Manager makes every cold op
// fall back to the Loader; nothing hangs.
func TestColdTierClosed(t *testing.T) {
	tm, _ := coldTier(t, false, 4096, 16)
	f, wa, wb := storingA(t, tm, 9000)
	_ = tm.Close()
	if _, err := f.m.Drain(nil); err != nil {
		t.Fatal(err)
	}
	get(t, f.m, "a", wa)
	get(t, f.m, "b", wb)
	if err := f.m.Prefetch("a"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, f.m, 1)
	if s := f.m.Stats(); s.ColdStoring != 0 || s.ColdTier.Adapters != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestColdRace: workers read acquired adapters and release them on their
// own goroutines while the owner acquires, prefetches and drains, with the
// tier's copies (stores and loads) in flight: run it with -race.
func TestColdRace(t *testing.T) {
	tm, _ := coldTier(t, true, 4096, 24, tier.WithWorkers(3))
	f := newFixture(t, 64, adapters.WithHotBudget(5, 0), adapters.WithCold(tm, 1), adapters.WithWorkers(2, 8))
	const n = 9
	ws := make([][]byte, n)
	for i := range ws {
		ws[i] = weights(fmt.Sprint("r", i), 3000+i*1500)
		if err := f.m.Register(fmt.Sprint(i), &loaderOf{w: ws[i]}); err != nil {
			t.Fatal(err)
		}
	}
	type job struct {
		h adapters.Handle
		b []byte
		i int
	}
	jobs := make(chan job, 4)
	var wg sync.WaitGroup
	var bad sync.Map
	for range 2 {
		rel, err := f.m.NewReleaser()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if !bytes.Equal(j.b, ws[j.i]) {
					bad.Store(j.i, true)
				}
				_ = rel.Release(j.h)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 3000
	if testing.Short() {
		iters = 500
	}
	for it := 0; it < iters; {
		if _, err := f.m.Drain(nil); err != nil {
			t.Fatal(err)
		}
		if f.m.Stats().Leases >= 2 { // the workers still read two: let them
			runtime.Gosched()
			continue
		}
		it++
		i := rng.IntN(n)
		id := fmt.Sprint(i)
		if rng.IntN(6) == 0 {
			if err := f.m.Prefetch(id); err != nil && !errors.Is(err, adapters.ErrNoRoom) && !errors.Is(err, adapters.ErrBusy) {
				t.Fatal(err)
			}
		} else {
			h, err := f.m.Acquire(id)
			switch {
			case err == nil:
				b, err := f.m.Bytes(h)
				if err != nil {
					t.Fatal(err)
				}
				jobs <- job{h, b, i}
			case errors.Is(err, adapters.ErrNoRoom), errors.Is(err, adapters.ErrLoading):
			default:
				t.Fatal(err)
			}
		}
	}
	close(jobs)
	wg.Wait()
	settle(t, f.m)
	bad.Range(func(k, _ any) bool { t.Errorf("adapter %v served wrong bytes", k); return true })
	s := f.m.Stats()
	f.check(t)
	if s.ColdTierLoads == 0 || s.ColdTierStores == 0 || s.Leases != 0 {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("%d acquires (%d hot), %d refused for room, %d prefetches; %d cold-tier loads, %d Loader loads, %d stores, %d evictions, %d skipped",
		s.Acquires, s.HotHits, s.NoRoom, s.Prefetches, s.ColdTierLoads, s.ColdLoads, s.ColdTierStores, s.ColdTierEvictions, s.ColdTierSkipped)
}

// TestColdClose: Close waits for the cold tier's copies in flight.
func TestColdClose(t *testing.T) {
	tm, _ := coldTier(t, true, 4096, 16)
	f, _, _ := storingA(t, tm, 20000)
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	if ts := tm.Stats(); ts.JobsInFlight != 0 || ts.Stores != 5 {
		t.Fatalf("tier after Close: %+v", ts)
	}
}
