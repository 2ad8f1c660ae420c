package adapters_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/tier"
)

// model is the obviously correct reference for the residency state
// machine: which adapters are registered, who holds them, which are
// pinned and until when. It knows nothing of tiers; the properties tie the
// Manager's tiers to it.
type model struct {
	size    map[string]int
	refs    map[string]int
	pinTill map[string]time.Time
	live    []adapters.Handle
	owner   map[adapters.Handle]string
	stale   []adapters.Handle
}

// policies are the rankings the model runs under, one per seed in turn:
// the Manager indexes each one's ranks, and builds with -race check every
// victim the indexes pick against a scan of every adapter.
var policies = []adapters.Policy{adapters.Window{}, adapters.LRU{}, adapters.FIFO{}, adapters.SizeAware{}}

// runModel applies the operations coded in ops to a Manager and to the
// model, and checks after every step that they agree: results and errors,
// held and pinned adapters hot with their weights intact, exact accounting
// (Check), and a failed load only when nothing could be demoted.
//
// With a cold tier (cold, admitting after admit Loader loads) the same
// properties hold, the tier's own accounting too (tier.Manager.Check), and
// Check ties the Manager's cold copies to the tier's blocks.
func runModel(t *testing.T, ops []byte, policy adapters.Policy, cold *tier.Manager, admit int, noWarm bool) {
	const slots = 4
	opts := []adapters.Option{adapters.WithHotBudget(slots, 0),
		adapters.WithPromotion(3, 20*time.Second, 15*time.Second), adapters.WithMaxPin(time.Minute), adapters.WithPolicy(policy)}
	if !noWarm {
		opts = append(opts, adapters.WithWarm(16*pageSize, 3, pageSize))
	}
	if cold != nil {
		opts = append(opts, adapters.WithCold(cold, admit))
	}
	f := newFixture(t, 48, opts...)
	rel, err := f.m.NewReleaser()
	if err != nil {
		t.Fatal(err)
	}
	md := &model{size: map[string]int{}, refs: map[string]int{}, pinTill: map[string]time.Time{}, owner: map[adapters.Handle]string{}}
	var kv []pages.Run
	next := func() byte {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return b
	}
	ids := []string{"a", "b", "c", "d", "e", "f"}
	pinned := func(id string) bool { return f.clk.now().Before(md.pinTill[id]) }
	// noneDemotable says every hot adapter is held or pinned: the only
	// state in which a load may fail for room.
	noneDemotable := func() bool {
		for id := range md.size {
			if r, _ := f.m.Residency(id); r == adapters.Hot && md.refs[id] == 0 && !pinned(id) {
				return false
			}
		}
		return true
	}
	loadErr := func(op, id string, err error) {
		t.Helper()
		switch {
		case err == nil:
		case errors.Is(err, adapters.ErrNoRoom):
			if !noneDemotable() {
				t.Fatalf("%s(%s): ErrNoRoom with a demotable adapter hot", op, id)
			}
		default:
			t.Fatalf("%s(%s): %v", op, id, err)
		}
	}
	for step := 0; len(ops) > 0; step++ {
		op, arg := next()%11, next()
		id := ids[int(arg)%len(ids)]
		_, reg := md.size[id]
		desc := fmt.Sprintf("step %d op %d %s", step, op, id)
		switch op {
		case 0: // Register
			size := 1 + int(next())*80 // up to 5 pages
			err := f.m.Register(id, funcLoader(t, id+"/"+fmt.Sprint(size), size))
			if reg != errors.Is(err, adapters.ErrExists) || (!reg && err != nil) {
				t.Fatalf("%s Register: %v (registered %v)", desc, err, reg)
			}
			if !reg {
				md.size[id] = size
			}
		case 1: // Unregister
			err := f.m.Unregister(id)
			switch {
			case !reg:
				if !errors.Is(err, adapters.ErrUnknown) {
					t.Fatalf("%s Unregister: %v", desc, err)
				}
			case md.refs[id] > 0:
				if !errors.Is(err, adapters.ErrBusy) {
					t.Fatalf("%s Unregister held: %v", desc, err)
				}
			case err != nil:
				t.Fatalf("%s Unregister: %v", desc, err)
			default:
				delete(md.size, id)
				delete(md.pinTill, id)
			}
		case 2, 3: // Acquire
			h, err := f.m.Acquire(id)
			if !reg {
				if !errors.Is(err, adapters.ErrUnknown) {
					t.Fatalf("%s Acquire: %v", desc, err)
				}
				break
			}
			loadErr(desc+" Acquire", id, err)
			if err == nil {
				md.refs[id]++
				md.live = append(md.live, h)
				md.owner[h] = id
			}
		case 4, 5: // Release: owner or releaser; sometimes a stale handle
			var h adapters.Handle
			stale := len(md.live) == 0 || (arg%5 == 0 && len(md.stale) > 0)
			if stale && len(md.stale) == 0 {
				break
			}
			if stale {
				h = md.stale[int(arg)%len(md.stale)]
			} else {
				i := int(arg) % len(md.live)
				h = md.live[i]
				md.live = append(md.live[:i], md.live[i+1:]...)
			}
			var err error
			if arg&1 == 0 {
				err = f.m.Release(h)
			} else {
				if err = rel.Release(h); err == nil {
					_, err = f.m.Drain(nil)
				}
			}
			if stale != errors.Is(err, adapters.ErrInvalidHandle) || (!stale && err != nil) {
				t.Fatalf("%s Release(stale %v): %v", desc, stale, err)
			}
			if !stale {
				md.refs[md.owner[h]]--
				delete(md.owner, h)
				md.stale = append(md.stale, h)
			}
		case 6: // Pin
			ttl := []time.Duration{0, time.Second, 30 * time.Second, time.Minute + 1}[arg%4]
			err := f.m.Pin(id, ttl)
			switch {
			case ttl <= 0 || ttl > time.Minute:
				if !errors.Is(err, adapters.ErrPinDuration) {
					t.Fatalf("%s Pin(%v): %v", desc, ttl, err)
				}
			case !reg:
				if !errors.Is(err, adapters.ErrUnknown) {
					t.Fatalf("%s Pin: %v", desc, err)
				}
			default:
				loadErr(desc+" Pin", id, err)
				if err == nil {
					md.pinTill[id] = f.clk.now().Add(ttl)
				}
			}
		case 7: // Unpin
			if err := f.m.Unpin(id); reg == errors.Is(err, adapters.ErrUnknown) {
				t.Fatalf("%s Unpin: %v", desc, err)
			}
			delete(md.pinTill, id)
		case 8: // Prefetch, waited for
			err := f.m.Prefetch(id)
			if !reg {
				if !errors.Is(err, adapters.ErrUnknown) {
					t.Fatalf("%s Prefetch: %v", desc, err)
				}
				break
			}
			loadErr(desc+" Prefetch", id, err)
			for f.m.Stats().Loading > 0 {
				if _, err := f.m.Drain(nil); err != nil {
					t.Fatal(err)
				}
			}
		case 9: // time passes
			f.clk.advance(time.Duration(arg%40) * time.Second)
			if err := f.m.Tick(); err != nil {
				t.Fatalf("%s Tick: %v", desc, err)
			}
			for f.m.Stats().Loading > 0 {
				if _, err := f.m.Drain(nil); err != nil {
					t.Fatal(err)
				}
			}
		case 10: // KV pressure in the shared region
			switch arg % 3 {
			case 0:
				if r, err := f.hot.Alloc(1+int(arg)%8, kvContent); err == nil {
					kv = append(kv, r)
				}
			case 1:
				if len(kv) > 0 {
					_ = f.hot.Free(kv[0])
					kv = kv[1:]
				}
			case 2:
				if _, err := f.hot.Evict(1 + int(arg)%16); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The properties.
		if err := f.m.Check(); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		if cold != nil {
			if err := cold.Check(); err != nil {
				t.Fatalf("%s: the cold tier: %v", desc, err)
			}
		}
		s := f.m.Stats()
		if s.ColdTier.Adapters > s.Registered || (cold == nil && s.ColdTierStores+s.ColdTierLoads != 0) {
			t.Fatalf("%s: cold tier counts %+v", desc, s)
		}
		if s.Registered != len(md.size) || s.Leases != len(md.live) || s.Hot.Adapters > slots || s.Warm.Adapters > 3 {
			t.Fatalf("%s: stats %+v, model %d registered %d handles", desc, s, len(md.size), len(md.live))
		}
		var running []string
		for id, n := range md.refs {
			if n > 0 {
				running = append(running, id)
			}
		}
		slices.Sort(running)
		if want := (adapters.LoraInfo{MaxLora: slots, Running: strings.Join(running, ","), At: f.clk.now()}); s.Lora != want {
			t.Fatalf("%s: lora info %+v, model %+v", desc, s.Lora, want)
		}
		for id, size := range md.size {
			if md.refs[id] > 0 || pinned(id) {
				if r, _ := f.m.Residency(id); r != adapters.Hot {
					t.Fatalf("%s: %s held %d pinned %v but %v", desc, id, md.refs[id], pinned(id), r)
				}
			}
			_ = size
		}
		coverage = append(coverage[:0], s)
		for _, h := range md.live {
			id := md.owner[h]
			b, err := f.m.Bytes(h)
			if err != nil || !bytes.Equal(b, weights(id+"/"+fmt.Sprint(md.size[id]), md.size[id])) {
				t.Fatalf("%s: the weights of held %s differ (%v)", desc, id, err)
			}
		}
	}
}

var coverage []adapters.Stats

// TestModel runs the model on random operation sequences.
func TestModel(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		ops := make([]byte, 600)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, ops, policies[seed%len(policies)], nil, 0, false) })
		if seed == 0 {
			t.Logf("seed 0 ends with %+v", coverage[0])
		}
	}
}

// coldGeometries are the cold tiers the model runs over, one per seed in
// turn: blocks of a page, blocks that do not divide the pages (a last block
// that overhangs the hot run), blocks larger than most adapters; tiers
// that hold a few adapters (evictions) or many; on disk or in host memory.
// Every third seed runs without a warm tier: hot adapters then go straight
// to cold.
var coldGeometries = []struct {
	disk      bool
	bs, slots int
	admit     int
}{
	{true, pageSize, 12, 1},
	{false, 3000, 20, 2},
	{true, 5000, 6, 1},
	{false, 1024, 40, 1},
	{true, 30000, 3, 2},
}

// TestModelCold runs the model with a cold tier under the warm one: every
// load from the tier is checked byte for byte (the held adapters' weights),
// and the Manager's cold copies against the tier's blocks after every step.
func TestModelCold(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 10
	}
	var total adapters.Stats
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 77))
		ops := make([]byte, 600)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		g := coldGeometries[seed%len(coldGeometries)]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			tm, _ := coldTier(t, g.disk, g.bs, g.slots)
			runModel(t, ops, policies[seed%len(policies)], tm, g.admit, seed%3 == 0)
		})
		s := coverage[0]
		total.ColdTierLoads += s.ColdTierLoads
		total.ColdTierStores += s.ColdTierStores
		total.ColdTierRejected += s.ColdTierRejected
		total.ColdTierEvictions += s.ColdTierEvictions
		total.ColdTierSkipped += s.ColdTierSkipped
	}
	t.Logf("over %d seeds: %d cold-tier loads, %d stores, %d rejected, %d evictions, %d skipped", seeds,
		total.ColdTierLoads, total.ColdTierStores, total.ColdTierRejected, total.ColdTierEvictions, total.ColdTierSkipped)
	if total.ColdTierLoads == 0 || total.ColdTierEvictions == 0 || total.ColdTierRejected == 0 {
		t.Errorf("the model did not reach every cold-tier path: %+v", total)
	}
}

// FuzzModel lets the fuzzer search for operation sequences that break the
// model's properties: go test -fuzz FuzzModel ./adapters.
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 4, 0, 4, 1})
	f.Add([]byte{0, 1, 40, 0, 2, 2, 2, 2, 6, 1, 9, 39, 10, 2, 3, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4096 {
			return
		}
		var cold *tier.Manager
		if len(ops)%2 == 1 { // half the inputs run over a cold tier in host memory
			g := coldGeometries[1]
			cold, _ = coldTier(t, false, g.bs, g.slots)
		}
		runModel(t, ops, policies[len(ops)%len(policies)], cold, 1, len(ops)%3 == 0)
	})
}
