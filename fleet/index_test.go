package fleet_test

import (
	"errors"
	"maps"
	"sync"
	"testing"

	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
)

type podEvent struct {
	pod string
	ev  kv.Event
}

// TestScoreSemantics pins llm-d's semantics case by case: one stream of
// events per case, then the scores of the request hs[0:3].
func TestScoreSemantics(t *testing.T) {
	hs := universe(t, 4)
	req := hs[:3]
	toks := func(n int) []uint32 { return make([]uint32, 2*n) }
	stored := func(pod, medium string, parent kv.Hash, blocks ...kv.Hash) podEvent {
		return podEvent{pod, kv.Event{Kind: kv.BlockStored, Hashes: blocks, Parent: parent, Tokens: toks(len(blocks)), BlockSize: 2, Medium: medium}}
	}
	placeholder := func(pod, medium string, blocks ...kv.Hash) podEvent {
		return podEvent{pod, kv.Event{Kind: kv.BlockStored, Hashes: blocks, BlockSize: 2, Medium: medium}}
	}
	removed := func(pod, medium string, blocks ...kv.Hash) podEvent {
		return podEvent{pod, kv.Event{Kind: kv.BlockRemoved, Hashes: blocks, Medium: medium}}
	}
	cleared := func(pod, medium string) podEvent {
		return podEvent{pod, kv.Event{Kind: kv.AllBlocksCleared, Medium: medium}}
	}
	var zero kv.Hash
	for _, tc := range []struct {
		name   string
		events []podEvent
		want   map[string]float64
	}{
		{"nothing indexed", nil, map[string]float64{}},
		{"hot pool (empty medium) scores as gpu", []podEvent{stored("a", "", zero, req...)}, map[string]float64{"a": 3}},
		{"medium lowercased", []podEvent{stored("a", "CPU", zero, req...)}, map[string]float64{"a": sum(0.8, 0.8, 0.8)}},
		{"unknown medium weighs 1.0", []podEvent{stored("a", "DISK", zero, req...)}, map[string]float64{"a": 3}},
		{"best medium per block", []podEvent{stored("a", "", zero, req[0]), stored("a", "CPU", zero, req...)},
			map[string]float64{"a": sum(1, 0.8, 0.8)}},
		{"prefix only: a gap ends the run", []podEvent{stored("a", "", zero, req[0], req[2])}, map[string]float64{"a": 1}},
		{"no first block, no score", []podEvent{stored("a", "", hs[0], req[1], req[2]), stored("b", "", zero, req[0])},
			map[string]float64{"b": 1}},
		{"orphan dropped: parent unknown", []podEvent{stored("a", "", hs[3], req...)}, map[string]float64{}},
		{"parent known from another pod", []podEvent{stored("b", "", zero, hs[3]), stored("a", "", hs[3], req...)},
			map[string]float64{"a": 3}},
		{"removal of one medium keeps the other", []podEvent{stored("a", "", zero, req...), stored("a", "CPU", zero, req...), removed("a", "GPU", req...)},
			map[string]float64{"a": sum(0.8, 0.8, 0.8)}},
		{"removal of the last medium", []podEvent{stored("a", "", zero, req...), stored("a", "CPU", zero, req...),
			removed("a", "", req...), removed("a", "cpu", req[1])}, map[string]float64{"a": 0.8}},
		{"removal on one pod keeps the other pod", []podEvent{stored("a", "", zero, req...), stored("b", "", zero, req...), removed("a", "", req[0])},
			map[string]float64{"b": 3}},
		{"placeholder resolves a known hash", []podEvent{stored("a", "", zero, req...), placeholder("a", "CPU", req...), removed("a", "", req...)},
			map[string]float64{"a": sum(0.8, 0.8, 0.8)}},
		{"placeholder of an unknown hash does nothing", []podEvent{placeholder("a", "CPU", req...)}, map[string]float64{}},
		{"placeholder after the hash was forgotten", []podEvent{stored("a", "", zero, req...), removed("a", "", req...), placeholder("a", "CPU", req...)},
			map[string]float64{}},
		{"AllBlocksCleared clears every medium", []podEvent{stored("a", "", zero, req...), stored("a", "CPU", zero, req...), cleared("a", "")},
			map[string]float64{}},
		{"AllBlocksCleared with a medium still clears all", []podEvent{stored("a", "CPU", zero, req...), cleared("a", "GPU")},
			map[string]float64{}},
		{"AllBlocksCleared keeps other pods", []podEvent{stored("a", "", zero, req...), stored("b", "CPU", zero, req...), cleared("a", "")},
			map[string]float64{"b": sum(0.8, 0.8, 0.8)}},
		{"AllBlocksCleared keeps hashes known", []podEvent{stored("a", "", zero, req...), cleared("a", ""), placeholder("b", "CPU", req...)},
			map[string]float64{"b": sum(0.8, 0.8, 0.8)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex(t)
			for _, pe := range tc.events {
				if err := x.Apply(pe.pod, &pe.ev); err != nil {
					t.Fatal(err)
				}
			}
			s := newScorer(t, x)
			if got := s.Score(req); !maps.Equal(got, tc.want) {
				t.Fatalf("scores %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPodsPerKey: a block keeps its most recently added entries.
func TestPodsPerKey(t *testing.T) {
	hs := universe(t, 1)
	x, err := fleet.NewIndex(fleet.WithPodsPerKey(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"a", "b", "a", "c"} { // a is refreshed, so b goes
		if err := x.Apply(pod, &kv.Event{Kind: kv.BlockStored, Hashes: hs, Tokens: []uint32{1}, BlockSize: 1}); err != nil {
			t.Fatal(err)
		}
	}
	want := []fleet.Entry{{Pod: "a", Medium: "gpu"}, {Pod: "c", Medium: "gpu"}}
	if got := x.Entries(nil, hs[0]); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("entries %v, want %v", got, want)
	}
}

func TestErrors(t *testing.T) {
	x := newIndex(t)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"empty pod", x.Apply("", &kv.Event{Kind: kv.BlockStored}), fleet.ErrInvalidPod},
		{"nil event", x.Apply("a", nil), fleet.ErrInvalidEvent},
		{"unknown kind", x.Apply("a", &kv.Event{Kind: 9}), fleet.ErrInvalidEvent},
		{"pods per key", second(fleet.NewIndex(fleet.WithPodsPerKey(0))), fleet.ErrInvalidConfig},
		{"hot medium", second(fleet.NewIndex(fleet.WithHotMedium(""))), fleet.ErrInvalidConfig},
		{"nil index", second(fleet.NewScorer(nil, nil)), fleet.ErrInvalidConfig},
		{"upper-case medium", second(fleet.NewScorer(x, fleet.Weights{"CPU": 0.8})), fleet.ErrInvalidWeight},
		{"negative weight", second(fleet.NewScorer(x, fleet.Weights{"cpu": -1})), fleet.ErrInvalidWeight},
		{"no pods", second(fleet.NewRouter(nil, nil, fleet.RoundRobin)), fleet.ErrInvalidConfig},
		{"duplicate pod", second(fleet.NewRouter(nil, []string{"a", "a"}, fleet.RoundRobin)), fleet.ErrInvalidPod},
		{"kv-aware without scorer", second(fleet.NewRouter(nil, []string{"a"}, fleet.KVAware)), fleet.ErrInvalidConfig},
		{"unknown policy", second(fleet.NewRouter(nil, []string{"a"}, 0)), fleet.ErrInvalidConfig},
		{"tokens per block", second(fleet.NewHasher(0, "", 0)), fleet.ErrInvalidConfig},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestHasherMatchesManager: Hasher computes a kv.Manager's own hashes.
func TestHasherMatchesManager(t *testing.T) {
	m := newManager(t, nil)
	h, err := fleet.NewHasher(kv.XXH3CBOR, "seed", 4)
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]uint32, 4*5+2)
	for i := range prompt {
		prompt[i] = uint32(i * 7)
	}
	got := h.Append(nil, prompt, kv.Key{Adapter: "lora"})
	want := m.Hasher().AppendHashes(nil, prompt, 4, kv.Key{Adapter: "lora"})
	if len(got) != 5 || len(got) != len(want) {
		t.Fatalf("%d hashes, manager %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("hash %d differs from the manager's", i)
		}
	}
}

// TestConcurrent applies events from one goroutine per pod while others
// score and pick (run with -race).
func TestConcurrent(t *testing.T) {
	hs := universe(t, 16)
	x := newIndex(t)
	s := newScorer(t, x)
	pods := []string{"a", "b", "c"}
	r, err := fleet.NewRouter(s, pods, fleet.KVAware)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			for n := range 500 {
				h := hs[(i+n)%len(hs)]
				_ = x.Apply(pod, &kv.Event{Kind: kv.BlockStored, Hashes: []kv.Hash{h}, Tokens: []uint32{1}, BlockSize: 1})
				if n%7 == 0 {
					_ = x.Apply(pod, &kv.Event{Kind: kv.BlockRemoved, Hashes: []kv.Hash{h}})
				}
				if n%101 == 0 {
					_ = x.Apply(pod, &kv.Event{Kind: kv.AllBlocksCleared})
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for n := range 500 {
				d := r.Pick(hs[n%4 : n%4+3])
				_ = s.Score(hs[:2])
				if err := r.Done(d.Index); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if load := r.Load(); load[0]+load[1]+load[2] != 0 {
		t.Fatalf("load %v after every Done", load)
	}
}

// sum adds ws in order at run time, as a scorer does (a constant
// expression would be exact).
func sum(ws ...float64) float64 {
	var s float64
	for _, w := range ws {
		s += w
	}
	return s
}

// TestApplyAllocs: Apply converts an event's hashes into the index's
// scratch slice, so applying an event whose pod, medium and blocks the
// index has seen allocates nothing.
func TestApplyAllocs(t *testing.T) {
	hs := universe(t, 16)
	x := newIndex(t)
	stored := &kv.Event{Kind: kv.BlockStored, Hashes: hs, Tokens: []uint32{1}, BlockSize: 1, Medium: "CPU"}
	if err := x.Apply("a", stored); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = x.Apply("a", stored) }); n != 0 {
		t.Errorf("Apply allocates %v times an event; want 0", n)
	}
}
