package fleet

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/locus-go/locus/kv"
)

// Errors of the package. Match them with errors.Is.
var (
	// ErrInvalidPod: an empty pod name, a duplicate one, or a pod index
	// out of range.
	ErrInvalidPod = errors.New("fleet: invalid pod")
	// ErrInvalidEvent: a nil event or one of an unknown kind.
	ErrInvalidEvent = errors.New("fleet: invalid event")
	// ErrInvalidWeight: a medium name that is empty or not lower case, or
	// a weight that is negative, infinite or NaN.
	ErrInvalidWeight = errors.New("fleet: invalid weight")
	// ErrInvalidConfig: an option or argument out of its range (no pods,
	// an unknown policy, no scorer for a KV-aware router).
	ErrInvalidConfig = errors.New("fleet: invalid config")
	// ErrNotBusy: Done for a pod with no request in flight.
	ErrNotBusy = errors.New("fleet: pod has no request in flight")
)

// DefaultPodsPerKey is llm-d's default podCacheSize: the (pod, medium)
// entries one block holds.
const DefaultPodsPerKey = 10

// DefaultHotMedium is the medium of an event with an empty Medium (kv's hot
// pool): llm-d's default for an event without one, and kv/events'
// default medium, lowercased.
const DefaultHotMedium = "gpu"

// IndexOption configures an Index.
type IndexOption interface{ apply(*Index) }

type indexOptionFunc func(*Index)

func (f indexOptionFunc) apply(x *Index) { f(x) }

// WithPodsPerKey bounds the (pod, medium) entries of one block (default
// DefaultPodsPerKey, llm-d's podCacheSize); the least recently added goes
// first. Set it to llm-d's if you configured that.
func WithPodsPerKey(n int) IndexOption { return indexOptionFunc(func(x *Index) { x.perKey = n }) }

// WithHotMedium names the medium of events with an empty Medium (default
// DefaultHotMedium). Give the medium the engines' publishers write
// (kv/events' WithMedium), in any case: it is lowercased.
func WithHotMedium(m string) IndexOption {
	return indexOptionFunc(func(x *Index) { x.hot = m })
}

// entry is one (pod, medium) pair on a block, both interned.
type entry struct{ pod, medium int32 }

// Index records which pod holds which block on which medium, from the
// pods' kv events, with llm-d's semantics (see the package doc). The zero
// Index is not usable: make one with NewIndex.
//
// It is safe for concurrent use: Apply takes a write lock, scoring a read
// lock. Use one Index per model (block hashes of different models never
// meet anyway) and give it every pod's events in the order each pod emits
// them; the order between pods does not matter except for the per-block
// bound (WithPodsPerKey).
type Index struct {
	perKey int
	hot    string

	mu     sync.RWMutex
	pods   map[string]int32
	names  []string // by pod id
	media  map[string]int32
	medium []string // by medium id
	// raw maps a medium as events spell it to its id, so that an event's
	// medium is not lowercased (and allocated) again.
	raw    map[string]int32
	blocks map[uint64][]entry
	// known is llm-d's engine-key → request-key mapping: the hashes a
	// BlockStored with tokens indexed and no BlockRemoved has since found
	// without entries.
	known map[uint64]struct{}
	st    IndexStats
	keys  []uint64 // applyEvent's scratch: the event's hashes as keys
}

// IndexStats counts what an Index did with its events.
type IndexStats struct {
	// Events counts events applied, by kind.
	Stored, Removed, Cleared uint64
	// Orphans counts BlockStored events dropped because their parent hash
	// was not known (llm-d drops them too).
	Orphans uint64
	// Unresolved counts hashes of placeholder BlockStored events (no
	// tokens) that were not known, and so not indexed.
	Unresolved uint64
	// Blocks is the hashes that hold at least one entry now, Entries the
	// (pod, medium) entries over them, Known the hashes known.
	Blocks, Entries, Known int
}

// NewIndex returns an empty Index. It fails with an error wrapping
// ErrInvalidConfig for a WithPodsPerKey below 1 or an empty WithHotMedium.
func NewIndex(opts ...IndexOption) (*Index, error) {
	x := &Index{perKey: DefaultPodsPerKey, hot: DefaultHotMedium}
	for _, o := range opts {
		if o != nil {
			o.apply(x)
		}
	}
	if x.perKey < 1 {
		return nil, fmt.Errorf("%w: %d pods per key; want 1 or more", ErrInvalidConfig, x.perKey)
	}
	if x.hot = strings.ToLower(x.hot); x.hot == "" {
		return nil, fmt.Errorf("%w: empty hot medium", ErrInvalidConfig)
	}
	x.pods, x.media, x.raw = make(map[string]int32), make(map[string]int32), make(map[string]int32)
	x.blocks, x.known = make(map[uint64][]entry), make(map[uint64]struct{})
	return x, nil
}

// Medium returns the medium an event's Medium is indexed under: lowercased,
// and the hot medium for an empty one (DefaultHotMedium for a nil or zero
// Index).
func (x *Index) Medium(m string) string {
	if m == "" {
		if x == nil || x.hot == "" {
			return DefaultHotMedium
		}
		return x.hot
	}
	return strings.ToLower(m)
}

// Apply applies one event of pod to the index. It copies what it keeps, so
// the caller may reuse ev (kv does). It fails with ErrInvalidPod for an
// empty pod, ErrInvalidEvent for a nil event or an unknown kind, and
// ErrInvalidConfig for a nil or zero Index; an event llm-d would drop (an
// orphan) is not an error, it is counted in Stats.
func (x *Index) Apply(pod string, ev *kv.Event) error {
	if pod == "" {
		return fmt.Errorf("%w: empty pod name", ErrInvalidPod)
	}
	if ev == nil {
		return fmt.Errorf("%w: nil", ErrInvalidEvent)
	}
	return applyEvent(x, pod, ev.Kind, ev.Medium, ev.Parent.Uint64(), ev.Hashes, len(ev.Tokens) > 0)
}

// hash64 is a block hash in either of its forms, kv.Hash or
// events.WireHash: the index keys blocks by their 64-bit form, which both
// carry.
type hash64 interface{ Uint64() uint64 }

// applyEvent is Apply and ApplyDecoded once their event is unpacked: it
// checks the kind, converts the hashes to their 64-bit form in the index's
// scratch slice (no allocation once it has grown) and applies the event
// under the write lock. pod is not empty.
func applyEvent[H hash64](x *Index, pod string, kind kv.EventKind, medium string, parent uint64, hashes []H, tokens bool) error {
	if x == nil || x.blocks == nil {
		return fmt.Errorf("%w: nil or zero index", ErrInvalidConfig)
	}
	switch kind {
	case kv.BlockStored, kv.BlockRemoved, kv.AllBlocksCleared:
	default:
		return fmt.Errorf("%w: kind %v", ErrInvalidEvent, kind)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	keys := x.keys[:0]
	for _, h := range hashes {
		keys = append(keys, h.Uint64())
	}
	x.keys = keys
	p := x.podLocked(pod)
	switch kind {
	case kv.BlockStored:
		x.st.Stored++
		x.storeLocked(entry{pod: p, medium: x.rawMediumLocked(medium)}, parent, keys, tokens)
	case kv.BlockRemoved:
		x.st.Removed++
		x.removeLocked(entry{pod: p, medium: x.rawMediumLocked(medium)}, keys)
	case kv.AllBlocksCleared:
		x.st.Cleared++
		x.clearLocked(p)
	}
	return nil
}

// Subscriber returns a function for kv.WithSubscriber that applies the
// manager's events to x as pod's, on the manager's owner goroutine. It
// drops nothing and never calls the manager. Use it when the router runs
// in the engines' process; otherwise feed Apply from the events you
// receive.
func (x *Index) Subscriber(pod string) func(*kv.Event) {
	return func(ev *kv.Event) { _ = x.Apply(pod, ev) }
}

// Clear removes every entry of pod, as AllBlocksCleared does: for a pod
// that left the fleet.
func (x *Index) Clear(pod string) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.pods[pod]; ok {
		x.clearLocked(p)
	}
}

// Stats returns the index's counts.
func (x *Index) Stats() IndexStats {
	if x == nil {
		return IndexStats{}
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := x.st
	st.Blocks, st.Known = len(x.blocks), len(x.known)
	for _, es := range x.blocks {
		st.Entries += len(es)
	}
	return st
}

// Entry is one (pod, medium) pair that holds a block.
type Entry struct {
	Pod, Medium string
}

// Entries appends the entries of block h to dst, least recently added
// first, and returns dst.
func (x *Index) Entries(dst []Entry, h kv.Hash) []Entry {
	if x == nil {
		return dst
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, e := range x.blocks[h.Uint64()] {
		dst = append(dst, Entry{Pod: x.names[e.pod], Medium: x.medium[e.medium]})
	}
	return dst
}

func (x *Index) podLocked(name string) int32 { return intern(x.pods, &x.names, name) }

func (x *Index) mediumLocked(name string) int32 { return intern(x.media, &x.medium, name) }

// intern returns the id of name in ids, giving it the next one, its index
// in *names, if it has none.
func intern(ids map[string]int32, names *[]string, name string) int32 {
	if id, ok := ids[name]; ok {
		return id
	}
	id := int32(len(*names))
	ids[name] = id
	*names = append(*names, name)
	return id
}

// rawMediumLocked returns the id of the medium an event's Medium m is
// indexed under (Medium), interning it.
func (x *Index) rawMediumLocked(m string) int32 {
	if id, ok := x.raw[m]; ok {
		return id
	}
	id := x.mediumLocked(x.Medium(m))
	x.raw[m] = id
	return id
}

// storeLocked applies a BlockStored of keys with parent key parent (0
// for none), with tokens or a placeholder without: llm-d's
// processEventBatch for *BlockStoredEvent, with request keys equal to
// engine keys.
func (x *Index) storeLocked(e entry, parent uint64, keys []uint64, tokens bool) {
	if parent != 0 {
		if _, ok := x.known[parent]; !ok {
			x.st.Orphans++
			return
		}
	}
	if !tokens {
		// A placeholder: llm-d's handleDeviceTierUpdate resolves each
		// engine key and adds the entry to the resolved keys.
		for _, k := range keys {
			if _, ok := x.known[k]; !ok {
				x.st.Unresolved++
				continue
			}
			x.addLocked(k, e)
		}
		return
	}
	for _, k := range keys {
		x.known[k] = struct{}{}
		x.addLocked(k, e)
	}
}

// addLocked adds e to block k's entries: refreshed if present, else
// appended, dropping the least recently added when full.
func (x *Index) addLocked(k uint64, e entry) {
	es := x.blocks[k]
	for i, have := range es {
		if have == e {
			copy(es[i:], es[i+1:])
			es[len(es)-1] = e
			return
		}
	}
	if len(es) >= x.perKey {
		copy(es, es[1:])
		es = es[:len(es)-1]
	}
	x.blocks[k] = append(es, e)
}

// removeLocked applies a BlockRemoved: llm-d's Evict with an engine key.
func (x *Index) removeLocked(e entry, keys []uint64) {
	for _, k := range keys {
		if _, ok := x.known[k]; !ok {
			continue
		}
		es := x.blocks[k]
		for i, have := range es {
			if have == e {
				es = append(es[:i], es[i+1:]...)
				break
			}
		}
		if len(es) > 0 {
			x.blocks[k] = es
			continue
		}
		delete(x.blocks, k)
		delete(x.known, k)
	}
}

// clearLocked removes every entry of pod p: llm-d's Clear, which leaves
// the engine-key mapping alone.
func (x *Index) clearLocked(p int32) {
	for k, es := range x.blocks {
		kept := es[:0]
		for _, e := range es {
			if e.pod != p {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(x.blocks, k)
			continue
		}
		clear(es[len(kept):])
		x.blocks[k] = kept
	}
}

// prefix calls fn(pod, weight) for every pod that holds keys[0], then for
// every later key while some pod is still in the run, for the pods still
// in it: the weight is the highest of weight(medium) over the pod's entries
// on that key. Pods leave the run at the first key they do not hold. It
// holds the read lock throughout. scratch is per-pod state, reused.
func (x *Index) prefix(keys []uint64, weight func(medium string) float64, fn func(pod int32, w float64), scratch *prefixScratch) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := len(x.names)
	s := scratch.reset(n, len(x.medium))
	for m, name := range x.medium {
		s.weights[m] = weight(name)
	}
	for i, k := range keys {
		for _, e := range x.blocks[k] {
			w := s.weights[e.medium]
			if !s.has[e.pod] || w > s.cur[e.pod] {
				s.cur[e.pod], s.has[e.pod] = w, true
			}
		}
		alive := 0
		for p := range n {
			if s.has[p] && (i == 0 || s.active[p]) {
				s.active[p] = true
				alive++
				fn(int32(p), s.cur[p])
			} else {
				s.active[p] = false
			}
			s.has[p] = false
		}
		if alive == 0 {
			return
		}
	}
}

// podName returns the name of pod id p.
func (x *Index) podName(p int32) string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.names[p]
}

// podIDs appends, for each name, its pod id or -1 if the index has never
// seen it.
func (x *Index) podIDs(dst []int32, names []string) []int32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, n := range names {
		if p, ok := x.pods[n]; ok {
			dst = append(dst, p)
		} else {
			dst = append(dst, -1)
		}
	}
	return dst
}

// prefixScratch is prefix's per-call state.
type prefixScratch struct {
	weights []float64 // by medium
	cur     []float64 // by pod: best weight on the current key
	has     []bool    // by pod: holds the current key
	active  []bool    // by pod: still in the run
}

func (s *prefixScratch) reset(pods, media int) *prefixScratch {
	s.weights = grow(s.weights, media)
	s.cur = grow(s.cur, pods)
	s.has = grow(s.has, pods)
	s.active = grow(s.active, pods)
	clear(s.has)
	clear(s.active)
	return s
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
