package adapters

import "time"

// Info is what a Policy sees of an adapter when ranking it.
type Info struct {
	ID     string
	Bytes  int // the adapter's size
	Recent int // acquisitions within the window, at most the promotion threshold
	// HotWorthy: acquired at least the promotion threshold of times within
	// the window (WithPromotion).
	HotWorthy bool
	LastUse   time.Duration // last acquisition, since the Manager was made
	Loaded    time.Duration // when it last became hot, since the Manager was made
}

// Policy ranks adapters for demotion: among the adapters that may be
// demoted (neither held, pinned nor loading), the one with the lowest Keep
// goes first; ties go to the lower registration order. A Policy is called
// on the owner goroutine only and must be a pure function of its Info.
//
// Use Window (the default) for the ADR's rule, LRU or FIFO to replay vLLM
// or SGLang, SizeAware for adapters of very different sizes.
//
// The Manager indexes the ranks (a heap per tier), so that a demotion
// takes O(log n) however many adapters are registered: it calls Keep when
// an adapter's Info changes (an acquisition, a load, a release, an access
// leaving the window), not at every demotion. So Keep must depend on its
// Info alone; a Keep that reads a clock or other state would rank by stale
// values. A NaN ranks as +Inf: that adapter is never demoted for room.
type Policy interface {
	Keep(a Info) float64
}

// Window is the ADR's rule and the default Policy: hot-worthy adapters
// (promotion threshold reached within the window) rank above all others,
// and least recently used go first within each class.
type Window struct{}

// Keep implements Policy.
func (Window) Keep(a Info) float64 {
	k := a.LastUse.Seconds()
	if a.HotWorthy {
		k += 1 << 40 // seconds: above any LastUse of a running process
	}
	return k
}

// LRU demotes the least recently acquired adapter first (vLLM's and
// SGLang's default).
type LRU struct{}

// Keep implements Policy.
func (LRU) Keep(a Info) float64 { return a.LastUse.Seconds() }

// FIFO demotes the adapter that became hot earliest first (SGLang's fifo).
type FIFO struct{}

// Keep implements Policy.
func (FIFO) Keep(a Info) float64 { return a.Loaded.Seconds() }

// SizeAware ranks by recent acquisitions per MiB: a large adapter used
// rarely goes before a small one used as rarely, since evicting it frees
// more room per future reload (the ADR's size-aware score). Recency breaks
// ties.
type SizeAware struct{}

// Keep implements Policy.
func (SizeAware) Keep(a Info) float64 {
	return float64(a.Recent)/(float64(a.Bytes)/(1<<20)+1e-9)*1e12 + a.LastUse.Seconds()
}
