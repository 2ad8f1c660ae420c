package fleet_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
)

// refIndex is llm-d-kv-cache v0.9.0's in-memory index and event pool,
// transcribed as plainly as possible (pkg/kvcache/kvblock/in_memory.go,
// pkg/kvevents/pool.go processEventBatch, pkg/kvcache/kvblock_scorer.go),
// with request keys equal to engine keys: the reference the Index is
// checked against.
type refIndex struct {
	podCacheSize int
	data         map[uint64][]refEntry // request key → pod entries, least recently added first
	engineToReq  map[uint64][]uint64   // engine key → request keys
	weights      map[string]float64    // backendConfigs
}

type refEntry struct{ pod, tier string }

func newRef(podCacheSize int, weights map[string]float64) *refIndex {
	return &refIndex{podCacheSize: podCacheSize, data: map[uint64][]refEntry{}, engineToReq: map[uint64][]uint64{}, weights: weights}
}

// add is InMemoryIndex.Add.
func (r *refIndex) add(engineKeys, requestKeys []uint64, entries []refEntry) {
	if engineKeys != nil {
		n := max(len(engineKeys), len(requestKeys))
		m := map[uint64][]uint64{}
		for i := range n {
			ek := engineKeys[i*len(engineKeys)/n]
			m[ek] = append(m[ek], requestKeys[i*len(requestKeys)/n])
		}
		for ek, rks := range m {
			r.engineToReq[ek] = rks
		}
	}
	for _, rk := range requestKeys {
		pc := r.data[rk]
		for _, e := range entries {
			if i := slices.Index(pc, e); i >= 0 {
				pc = append(slices.Delete(pc, i, i+1), e)
				continue
			}
			if len(pc) == r.podCacheSize {
				pc = pc[1:]
			}
			pc = append(pc, e)
		}
		r.data[rk] = slices.Clone(pc)
	}
}

// evictEngine is InMemoryIndex.Evict with an EngineKey.
func (r *refIndex) evictEngine(key uint64, entries []refEntry) {
	rks, ok := r.engineToReq[key]
	if !ok {
		return
	}
	for _, rk := range rks {
		r.evictRequest(rk, entries)
	}
	allEmpty := true
	for _, rk := range rks {
		if len(r.data[rk]) > 0 {
			allEmpty = false
		}
	}
	if allEmpty {
		delete(r.engineToReq, key)
	}
}

func (r *refIndex) evictRequest(rk uint64, entries []refEntry) {
	pc, ok := r.data[rk]
	if !ok {
		return
	}
	for _, e := range entries {
		if i := slices.Index(pc, e); i >= 0 {
			pc = slices.Delete(pc, i, i+1)
		}
	}
	if len(pc) == 0 {
		delete(r.data, rk)
		return
	}
	r.data[rk] = pc
}

// clearPod is InMemoryIndex.Clear.
func (r *refIndex) clearPod(pod string) {
	for rk, pc := range r.data {
		var matched []refEntry
		for _, e := range pc {
			if e.pod == pod {
				matched = append(matched, e)
			}
		}
		if len(matched) > 0 {
			r.evictRequest(rk, matched)
		}
	}
}

// apply is Pool.processEventBatch for one event.
func (r *refIndex) apply(pod string, ev *kv.Event) {
	tier := "gpu"
	if ev.Medium != "" {
		tier = strings.ToLower(ev.Medium)
	}
	entries := []refEntry{{pod, tier}}
	switch ev.Kind {
	case kv.BlockStored:
		var engineKeys []uint64
		for _, h := range ev.Hashes {
			engineKeys = append(engineKeys, h.Uint64())
		}
		if p := ev.Parent.Uint64(); p != 0 {
			if _, ok := r.engineToReq[p]; !ok {
				return // "Failed to get request key for parent block"
			}
		}
		// The token processor: one request key per full block, equal to
		// the engine key here.
		var requestKeys []uint64
		if ev.BlockSize > 0 {
			requestKeys = engineKeys[:min(len(engineKeys), len(ev.Tokens)/ev.BlockSize)]
		}
		if len(requestKeys) == 0 {
			if len(ev.Tokens) != 0 || len(engineKeys) == 0 {
				return
			}
			seen := map[uint64]bool{}
			var resolved []uint64
			for _, ek := range engineKeys {
				rks, ok := r.engineToReq[ek]
				if !ok || len(rks) == 0 {
					continue
				}
				if rk := rks[len(rks)-1]; !seen[rk] {
					seen[rk] = true
					resolved = append(resolved, rk)
				}
			}
			if len(resolved) > 0 {
				r.add(nil, resolved, entries)
			}
			return
		}
		r.add(engineKeys, requestKeys, entries)
	case kv.BlockRemoved:
		for _, h := range ev.Hashes {
			r.evictEngine(h.Uint64(), entries)
		}
	case kv.AllBlocksCleared:
		r.clearPod(pod)
	}
}

// lookup is InMemoryIndex.Lookup with an empty pod set.
func (r *refIndex) lookup(keys []uint64) map[uint64][]refEntry {
	out := map[uint64][]refEntry{}
	for _, k := range keys {
		if pc, ok := r.data[k]; ok {
			if len(pc) == 0 {
				return out
			}
			out[k] = slices.Clone(pc)
		}
	}
	return out
}

// score is LongestPrefixScorer.Score over lookup.
func (r *refIndex) score(keys []uint64) map[string]float64 {
	podScores := map[string]float64{}
	if len(keys) == 0 {
		return podScores
	}
	keyToPods := r.lookup(keys)
	fill := func(dst map[string]float64, entries []refEntry) {
		for _, e := range entries {
			w := 1.0
			if r.weights != nil {
				if v, ok := r.weights[e.tier]; ok {
					w = v
				}
			}
			if cur, ok := dst[e.pod]; !ok || w > cur {
				dst[e.pod] = w
			}
		}
	}
	cur := map[string]float64{}
	fill(cur, keyToPods[keys[0]])
	active := map[string]struct{}{}
	for pod, w := range cur {
		active[pod] = struct{}{}
		podScores[pod] = w
	}
	for i := 1; i < len(keys); i++ {
		if len(active) == 0 {
			break
		}
		clear(cur)
		fill(cur, keyToPods[keys[i]])
		for pod := range active {
			if w, ok := cur[pod]; ok {
				podScores[pod] += w
			} else {
				delete(active, pod)
			}
		}
	}
	return podScores
}

// universe returns n distinct hashes, made by a real kv.Hasher.
func universe(t testing.TB, n int) []kv.Hash {
	t.Helper()
	h, err := kv.NewHasher(kv.SHA256CBOR, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]kv.Hash, n)
	for i := range out {
		out[i] = h.Block(kv.Hash{}, []uint32{uint32(i)}, kv.Key{})
	}
	return out
}

// randomEvent draws an event over the hashes: stores (with tokens or as
// placeholders, with a parent or without), removals and resets, on a mix
// of media spelled in different cases.
func randomEvent(rng *rand.Rand, hs []kv.Hash) *kv.Event {
	media := []string{"", "GPU", "gpu", "CPU", "cpu", "DISK", "SHARED_STORAGE"}
	ev := &kv.Event{Medium: media[rng.IntN(len(media))], BlockSize: 2}
	pick := func() []kv.Hash {
		n := 1 + rng.IntN(4)
		out := make([]kv.Hash, n)
		for i := range out {
			out[i] = hs[rng.IntN(len(hs))]
		}
		return out
	}
	switch r := rng.IntN(20); {
	case r < 11:
		ev.Kind = kv.BlockStored
		ev.Hashes = pick()
		if rng.IntN(3) > 0 {
			ev.Tokens = make([]uint32, 2*len(ev.Hashes))
		}
		if rng.IntN(2) == 0 {
			ev.Parent = hs[rng.IntN(len(hs))]
		}
	case r < 19:
		ev.Kind = kv.BlockRemoved
		ev.Hashes = pick()
	default:
		ev.Kind = kv.AllBlocksCleared
	}
	return ev
}

// TestIndexMatchesReference applies random event streams of three pods to
// an Index and to the transcription of llm-d's index, and after every
// event compares the entries of every block (order included) and the
// scores of random requests, exactly.
func TestIndexMatchesReference(t *testing.T) {
	hs := universe(t, 10)
	pods := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		perKey  int
		weights fleet.Weights
	}{
		{"llm-d defaults", fleet.DefaultPodsPerKey, nil},
		{"two entries per block", 2, nil},
		{"every medium weighted", 4, fleet.Weights{"gpu": 1, "cpu": 0.8, "disk": 0.5, "shared_storage": 0.3}},
		{"empty weights", 3, fleet.Weights{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(20) {
				rng := rand.New(rand.NewPCG(seed, 7))
				x, err := fleet.NewIndex(fleet.WithPodsPerKey(tc.perKey))
				if err != nil {
					t.Fatal(err)
				}
				s, err := fleet.NewScorer(x, tc.weights)
				if err != nil {
					t.Fatal(err)
				}
				w := map[string]float64(tc.weights)
				if w == nil {
					w = fleet.DefaultWeights()
				}
				ref := newRef(tc.perKey, w)
				for step := range 300 {
					pod := pods[rng.IntN(len(pods))]
					ev := randomEvent(rng, hs)
					if err := x.Apply(pod, ev); err != nil {
						t.Fatal(err)
					}
					ref.apply(pod, ev)
					where := fmt.Sprintf("seed %d step %d (%s %v on %q)", seed, step, pod, ev.Kind, ev.Medium)
					for _, h := range hs {
						var want []fleet.Entry
						for _, e := range ref.data[h.Uint64()] {
							want = append(want, fleet.Entry{Pod: e.pod, Medium: e.tier})
						}
						if got := x.Entries(nil, h); !slices.Equal(got, want) {
							t.Fatalf("%s: block %v: entries %v, llm-d %v", where, h.Uint64(), got, want)
						}
					}
					for range 4 {
						req := make([]kv.Hash, rng.IntN(6))
						keys := make([]uint64, len(req))
						for i := range req {
							req[i] = hs[rng.IntN(len(hs))]
							keys[i] = req[i].Uint64()
						}
						got, want := s.Score(req), ref.score(keys)
						if len(got) != len(want) {
							t.Fatalf("%s: scores %v, llm-d %v", where, got, want)
						}
						for pod, v := range want {
							if g, ok := got[pod]; !ok || g != v {
								t.Fatalf("%s: scores %v, llm-d %v", where, got, want)
							}
						}
					}
				}
				if st := x.Stats(); st.Blocks != len(ref.data) || st.Known != len(ref.engineToReq) {
					t.Fatalf("seed %d: stats %+v; llm-d holds %d blocks, %d engine keys", seed, st, len(ref.data), len(ref.engineToReq))
				}
			}
		})
	}
}
