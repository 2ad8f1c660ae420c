package fleet

import (
	"fmt"
	"sync"

	"github.com/locus-go/locus/kv"
)

// Policy is how a Router picks a pod.
type Policy uint8

const (
	// KVAware picks the pod with the best Scorer score; among equal
	// scores the one with the fewest requests in flight; among those the
	// first in the Router's pod order.
	KVAware Policy = iota + 1
	// RoundRobin picks the pods in turn, ignoring the index: the baseline
	// KV-aware routing is measured against.
	RoundRobin
)

// String returns "kv-aware" or "round-robin".
func (p Policy) String() string {
	switch p {
	case KVAware:
		return "kv-aware"
	case RoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Decision is a Router's choice for one request.
type Decision struct {
	// Pod is the chosen pod's name and Index its position in the
	// Router's pods.
	Pod   string
	Index int
	// Score is the chosen pod's score (0 under RoundRobin, and when no
	// pod holds the request's first block).
	Score float64
	// Load is the pod's requests in flight before this one.
	Load int
}

// Router sends each request to one of a fixed set of pods, by Policy, and
// counts the requests in flight per pod (Pick adds one, Done takes it
// away). It is safe for concurrent use: requests are picked on their own
// goroutines while the Index takes events.
//
// Use it as the routing step of a fleet of engines whose events feed the
// Scorer's Index. When not to: it has no notion of a pod's capacity beyond
// its in-flight count, so a fleet where one prefix dominates needs a load
// threshold on top (llm-d combines its prefix scorer with load scorers).
type Router struct {
	s      *Scorer
	pods   []string
	policy Policy

	mu   sync.Mutex
	load []int
	next int // RoundRobin's next pod
	buf  sync.Pool
}

// routeBuf is one Pick's scratch.
type routeBuf struct {
	keys   []uint64
	ids    []int32
	scores []float64
}

// NewRouter returns a Router over pods (their names on the events, in the
// order that breaks the last ties). s may be nil for RoundRobin. It fails
// with ErrInvalidConfig for no pods, an unknown policy or a KVAware router
// without a scorer, and ErrInvalidPod for an empty or repeated name.
func NewRouter(s *Scorer, pods []string, p Policy) (*Router, error) {
	if len(pods) == 0 {
		return nil, fmt.Errorf("%w: no pods", ErrInvalidConfig)
	}
	if p != KVAware && p != RoundRobin {
		return nil, fmt.Errorf("%w: policy %v", ErrInvalidConfig, p)
	}
	if p == KVAware && s == nil {
		return nil, fmt.Errorf("%w: a KV-aware router needs a scorer", ErrInvalidConfig)
	}
	seen := make(map[string]bool, len(pods))
	for _, name := range pods {
		if name == "" || seen[name] {
			return nil, fmt.Errorf("%w: %q", ErrInvalidPod, name)
		}
		seen[name] = true
	}
	return &Router{s: s, pods: append([]string(nil), pods...), policy: p, load: make([]int, len(pods))}, nil
}

// Pods returns the router's pods, in order (none for a nil Router).
func (r *Router) Pods() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.pods...)
}

// Policy returns the router's policy (0 for a nil Router).
func (r *Router) Policy() Policy {
	if r == nil {
		return 0
	}
	return r.policy
}

// Pick chooses the pod for a request whose block hashes are hashes and
// counts the request in flight there until Done. A nil or zero Router
// picks none: a Decision with Index -1.
func (r *Router) Pick(hashes []kv.Hash) Decision {
	if r == nil || len(r.pods) == 0 || r.policy != RoundRobin && r.s == nil {
		return Decision{Index: -1}
	}
	if r.policy == RoundRobin {
		r.mu.Lock()
		defer r.mu.Unlock()
		i := r.next
		r.next = (r.next + 1) % len(r.pods)
		d := Decision{Pod: r.pods[i], Index: i, Load: r.load[i]}
		r.load[i]++
		return d
	}
	b, _ := r.buf.Get().(*routeBuf)
	if b == nil {
		b = new(routeBuf)
	}
	defer r.buf.Put(b)
	b.keys = b.keys[:0]
	for _, h := range hashes {
		b.keys = append(b.keys, h.Uint64())
	}
	b.ids = r.s.x.podIDs(b.ids[:0], r.pods)
	b.scores = grow(b.scores, len(r.pods))
	r.s.scoresInto(b.scores, b.ids, b.keys)
	r.mu.Lock()
	defer r.mu.Unlock()
	best := 0
	for i := 1; i < len(r.pods); i++ {
		switch {
		case b.scores[i] > b.scores[best]:
			best = i
		case b.scores[i] == b.scores[best] && r.load[i] < r.load[best]:
			best = i
		}
	}
	d := Decision{Pod: r.pods[best], Index: best, Score: b.scores[best], Load: r.load[best]}
	r.load[best]++
	return d
}

// Scores returns every pod's score for hashes, in the router's pod order
// (0 for a pod that does not hold the first block).
func (r *Router) Scores(hashes []kv.Hash) []float64 {
	if r == nil {
		return nil
	}
	out := make([]float64, len(r.pods))
	if r.s == nil {
		return out
	}
	keys := make([]uint64, len(hashes))
	for i, h := range hashes {
		keys[i] = h.Uint64()
	}
	r.s.scoresInto(out, r.s.x.podIDs(nil, r.pods), keys)
	return out
}

// Done ends a request Pick sent to the pod at index i. It fails with
// ErrInvalidPod for an index out of range and ErrNotBusy when the pod has
// no request in flight.
func (r *Router) Done(i int) error {
	if r == nil {
		return fmt.Errorf("%w: nil router", ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 || i >= len(r.pods) {
		return fmt.Errorf("%w: index %d of %d pods", ErrInvalidPod, i, len(r.pods))
	}
	if r.load[i] == 0 {
		return fmt.Errorf("%w: %s", ErrNotBusy, r.pods[i])
	}
	r.load[i]--
	return nil
}

// Load returns the requests in flight per pod, in the router's pod order.
func (r *Router) Load() []int {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.load...)
}
