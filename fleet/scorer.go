package fleet

import (
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"

	"github.com/locus-go/locus/kv"
)

// Weights maps a medium, lower case as the Index names it ("gpu", "cpu",
// "disk", "shared_storage"), to the weight a block held on it scores:
// llm-d's backendConfigs. A medium not in the map weighs 1.0, as in llm-d.
type Weights map[string]float64

// DefaultWeights returns llm-d's default backendConfigs: gpu 1.0, cpu 0.8.
// Every other medium (kv's "DISK", tier/redis's "SHARED_STORAGE") then
// scores as the GPU does: add its weight when a tier emits it.
func DefaultWeights() Weights { return Weights{"gpu": 1.0, "cpu": 0.8} }

// check validates w: names non-empty and lower case (llm-d compares them
// with the lowercased medium, so an upper-case name would never match),
// weights finite and not negative.
func (w Weights) check() error {
	for name, v := range w {
		if name == "" || name != strings.ToLower(name) {
			return fmt.Errorf("%w: medium %q: want a non-empty lower-case name", ErrInvalidWeight, name)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: medium %q: weight %v", ErrInvalidWeight, name, v)
		}
	}
	return nil
}

// Scorer scores a request's block hashes per pod with llm-d's
// LongestPrefix strategy over an Index: the sum, over the pod's longest
// run of consecutive blocks from the first, of the best weight among the
// media the pod holds each block on. It is safe for concurrent use.
//
// Use it to rank pods for a request, or to compare with llm-d's scorer.
// It knows nothing of load: combine it with one (Router breaks ties by
// load), since a pure prefix score sends every request of a popular
// prefix to the same pod.
type Scorer struct {
	x       *Index
	weights Weights
	scratch sync.Pool // *prefixScratch
}

// NewScorer returns a Scorer over x with the given weights; nil weights are
// DefaultWeights, an empty non-nil map weighs every medium 1.0. It copies
// the weights. It fails with ErrInvalidConfig for a nil index and
// ErrInvalidWeight for a bad weight (see Weights).
func NewScorer(x *Index, w Weights) (*Scorer, error) {
	if x == nil {
		return nil, fmt.Errorf("%w: nil index", ErrInvalidConfig)
	}
	if w == nil {
		w = DefaultWeights()
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	return &Scorer{x: x, weights: maps.Clone(w)}, nil
}

// Weight returns the weight of a medium as the Index names it: the
// configured one, else 1.0 (0 for a nil Scorer).
func (s *Scorer) Weight(medium string) float64 {
	if s == nil {
		return 0
	}
	if w, ok := s.weights[medium]; ok {
		return w
	}
	return 1.0
}

// Index returns the index s scores over (nil for a nil Scorer).
func (s *Scorer) Index() *Index {
	if s == nil {
		return nil
	}
	return s.x
}

// Score returns the score of every pod that holds the first of hashes (a
// request's block hashes from its first block, as kv.Hasher.AppendHashes
// computes them), keyed by pod name; pods that do not hold the first block
// are absent, and so is every pod when hashes is empty. This is llm-d's
// LongestPrefixScorer.Score over its index's Lookup, value for value.
func (s *Scorer) Score(hashes []kv.Hash) map[string]float64 {
	out := make(map[string]float64)
	if len(hashes) == 0 {
		return out
	}
	keys := make([]uint64, len(hashes))
	for i, h := range hashes {
		keys[i] = h.Uint64()
	}
	scores := make(map[int32]float64)
	s.prefix(keys, func(p int32, w float64) { scores[p] += w })
	for p, v := range scores {
		out[s.x.podName(p)] = v
	}
	return out
}

// scoresInto sets dst[i] to the score of pod ids[i] (-1: a pod the index
// has not seen, score 0) and reports whether any pod scored.
func (s *Scorer) scoresInto(dst []float64, ids []int32, keys []uint64) bool {
	clear(dst)
	if len(keys) == 0 {
		return false
	}
	scored := false
	s.prefix(keys, func(p int32, w float64) {
		for i, id := range ids {
			if id == p {
				dst[i] += w
				scored = true
			}
		}
	})
	return scored
}

func (s *Scorer) prefix(keys []uint64, fn func(p int32, w float64)) {
	sc, _ := s.scratch.Get().(*prefixScratch)
	if sc == nil {
		sc = new(prefixScratch)
	}
	s.x.prefix(keys, s.Weight, fn, sc)
	s.scratch.Put(sc)
}
