// Package frag replays the fragmentation experiment of the slab-allocator
// material on simulated page indices: random allocations of up to 256
// MB-equivalent from one large region, thousands of alloc/free operations,
// and the external fragmentation of the free space over time for first fit
// and best fit (package pages) and for size classes (package classes).
//
// # Setup
//
// A page stands for PageMB megabytes (1 by default); the region has Pages
// pages (16384: 16 GB-equivalent). Each operation allocates with
// probability AllocProb (1/2: alloc/free cycles), and otherwise frees one
// live allocation chosen uniformly at random (an operation with nothing
// live allocates). Sizes are uniform on 1 to MaxPages pages (256: up to
// 256 MB). The number of live allocations is then a random walk: the
// region holds about 127 allocations of the mean size, which some trials
// reach within 5000 operations and others do not. An allocation that does
// not fit is refused and counted, and the run goes on; a higher AllocProb
// keeps the region full (a sensitivity run). Every trial draws the operation kinds,
// sizes and victims from one seeded PCG stream shared by the three
// strategies (common random numbers), so they see the same request
// sequence as far as their refusals allow.
//
// The pages strategies run the real allocator with 1-byte pages. The size
// classes are powers of two from 1 to MaxPages pages, one pool each, and
// split the same budget of Pages pages in proportion to the bytes each
// class is expected to hold under the size distribution (weights
// (s_k - s_(k-1)) × s_k), with at least one block per class.
//
// # Measures
//
// External fragmentation after an operation is 1 - LargestFree/Free: the
// share of the free pages that lie outside the longest free run (0 when no
// page is free). The experiment reports its peak so far at each operation,
// averaged over trials. A size class has no external fragmentation by
// construction: each of its free blocks serves every request of the class,
// so the same definition applied per class (free memory a request of the
// class cannot use) is 0. What size classes pay instead is measured too:
// internal fragmentation (1 - pages requested / pages handed out) and
// allocations refused while enough pages were free elsewhere (in other
// classes; for pages strategies, in runs too short).
package frag

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// Config is the experiment's setup. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Pages       int     // pages in the region
	PageMB      int     // megabytes one page stands for (labels only)
	MaxPages    int     // largest allocation, in pages
	Ops         int     // operations per trial
	Trials      int     // trials (seeds)
	Seed        uint64  // first seed; trial t uses Seed+t
	AllocProb   float64 // probability that an operation allocates
	Checkpoints []int   // operations at which the table reports
}

// The largest setup Run accepts: a bigger one would hold more memory (a
// region of 1-byte pages, three series of Ops values) or run longer than an
// experiment on a development machine should.
const (
	MaxRegionPages = 1 << 24
	MaxOps         = 1 << 20
	MaxTrials      = 10000
)

// DefaultConfig returns the setup described in the package doc.
func DefaultConfig() Config {
	return Config{Pages: 16384, PageMB: 1, MaxPages: 256, Ops: 5000, Trials: 50, Seed: 1, AllocProb: 0.5,
		Checkpoints: []int{100, 500, 1000, 5000}}
}

// The strategies, in the order Result.Series holds them.
const (
	FirstFit    = "first-fit"
	BestFit     = "best-fit"
	SizeClasses = "size classes"
)

// Material is what the slab-allocator material reports for first fit (peak
// external fragmentation after 100, 500, 1000 and 5000 operations); it
// reports 0 for slabs.
var Material = map[int]float64{100: 0.08, 500: 0.22, 1000: 0.34, 5000: 0.41}

// Series is one strategy's measurements, over all trials.
type Series struct {
	Strategy string
	// Peak[i] and Now[i] are the peak-so-far and the current external
	// fragmentation after operation i+1, averaged over trials.
	Peak, Now []float64
	// PeakMin and PeakMax are the least and greatest peak over trials at
	// each checkpoint.
	PeakMin, PeakMax map[int]float64
	// Utilization[i] is the share of pages allocated after operation i+1,
	// averaged over trials (pages handed out, for size classes).
	Utilization []float64
	// Per trial on average: allocations attempted, refused, and refused
	// although at least as many pages were free in all.
	Attempts, Refused, RefusedWithRoom float64
	// InternalFrag is 1 - requested/handed out over all allocations (size
	// classes only; a page run is exactly the size asked for).
	InternalFrag float64
}

// Result is the outcome of Run.
type Result struct {
	Config Config
	Series []Series // first fit, best fit, size classes
}

// validate checks every value against its range and names each one that
// is out of it; names are how the caller spells the fields (a flag, or a
// Config field), in the order Pages, MaxPages, Ops, Trials, AllocProb.
func (cfg Config) validate(names ...string) error {
	var errs []error
	bad := func(i int, v any, want string) {
		errs = append(errs, fmt.Errorf("frag: %w: %s %v: want %s", pool.ErrInvalidConfig, names[i], v, want))
	}
	if cfg.Pages <= 0 || cfg.Pages > MaxRegionPages {
		bad(0, cfg.Pages, fmt.Sprintf("1 to %d", MaxRegionPages))
	}
	if cfg.MaxPages <= 0 || (cfg.Pages > 0 && cfg.MaxPages > cfg.Pages) {
		bad(1, cfg.MaxPages, fmt.Sprintf("1 to the region's pages (%d)", cfg.Pages))
	}
	if cfg.Ops <= 0 || cfg.Ops > MaxOps {
		bad(2, cfg.Ops, fmt.Sprintf("1 to %d", MaxOps))
	}
	if cfg.Trials <= 0 || cfg.Trials > MaxTrials {
		bad(3, cfg.Trials, fmt.Sprintf("1 to %d", MaxTrials))
	}
	if !(cfg.AllocProb > 0 && cfg.AllocProb <= 1) {
		bad(4, cfg.AllocProb, "above 0, at most 1")
	}
	return errors.Join(errs...)
}

// Run runs every trial of every strategy and averages them.
func Run(cfg Config) (*Result, error) {
	def := DefaultConfig()
	orDefault(&cfg.Pages, def.Pages)
	orDefault(&cfg.PageMB, def.PageMB)
	orDefault(&cfg.MaxPages, def.MaxPages)
	orDefault(&cfg.Ops, def.Ops)
	orDefault(&cfg.Trials, def.Trials)
	orDefault(&cfg.AllocProb, def.AllocProb)
	if cfg.Checkpoints == nil {
		cfg.Checkpoints = def.Checkpoints
	}
	if err := cfg.validate("Pages", "MaxPages", "Ops", "Trials", "AllocProb"); err != nil {
		return nil, err
	}
	for _, c := range cfg.Checkpoints {
		if c < 1 || c > cfg.Ops {
			return nil, fmt.Errorf("frag: %w: checkpoint %d outside 1 to %d operations", pool.ErrInvalidConfig, c, cfg.Ops)
		}
	}
	res := &Result{Config: cfg}
	for _, strategy := range []string{FirstFit, BestFit, SizeClasses} {
		s := Series{Strategy: strategy, Peak: make([]float64, cfg.Ops), Now: make([]float64, cfg.Ops),
			Utilization: make([]float64, cfg.Ops), PeakMin: map[int]float64{}, PeakMax: map[int]float64{}}
		var requested, handedOut float64
		for trial := range cfg.Trials {
			a, err := newAllocator(strategy, cfg)
			if err != nil {
				return nil, err
			}
			tr := runTrial(a, cfg, cfg.Seed+uint64(trial))
			if err := a.close(); err != nil {
				return nil, err
			}
			if tr.err != nil {
				return nil, tr.err
			}
			for i := range cfg.Ops {
				s.Peak[i] += tr.peak[i] / float64(cfg.Trials)
				s.Now[i] += tr.now[i] / float64(cfg.Trials)
				s.Utilization[i] += tr.util[i] / float64(cfg.Trials)
			}
			for _, c := range cfg.Checkpoints {
				p := tr.peak[c-1]
				if lo, ok := s.PeakMin[c]; !ok || p < lo {
					s.PeakMin[c] = p
				}
				s.PeakMax[c] = max(s.PeakMax[c], p)
			}
			s.Attempts += float64(tr.attempts) / float64(cfg.Trials)
			s.Refused += float64(tr.refused) / float64(cfg.Trials)
			s.RefusedWithRoom += float64(tr.refusedWithRoom) / float64(cfg.Trials)
			requested += float64(tr.requested)
			handedOut += float64(tr.handedOut)
		}
		if handedOut > 0 {
			s.InternalFrag = 1 - requested/handedOut
		}
		res.Series = append(res.Series, s)
	}
	return res, nil
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// allocator is what a trial needs of a strategy. Sizes are in pages.
type allocator interface {
	alloc(n int) (id any, handedOut int, err error)
	free(id any) error
	// state returns the pages handed out and the external fragmentation.
	state() (used int, ext float64)
	// free pages in all
	freePages() int
	close() error
}

func newAllocator(strategy string, cfg Config) (allocator, error) {
	switch strategy {
	case FirstFit, BestFit:
		b, err := heap.New(cfg.Pages, 1) // 1-byte pages: page indices, simulated
		if err != nil {
			return nil, err
		}
		fit := pages.BestFit
		if strategy == FirstFit {
			fit = pages.FirstFit
		}
		p, err := pages.New(b, 1, pages.WithFit(fit))
		if err != nil {
			return nil, err
		}
		return runs{p}, nil
	default:
		var sizes, weights []int
		prev := 0
		for s := 1; ; s *= 2 {
			s = min(s, cfg.MaxPages)
			sizes = append(sizes, s)
			weights = append(weights, (s-prev)*s)
			prev = s
			if s == cfg.MaxPages {
				break
			}
		}
		c, err := classes.Default(splitClasses(cfg.Pages, sizes, weights))
		if err != nil {
			return nil, err
		}
		return slabs{c, sizes}, nil
	}
}

// splitClasses gives class k budget×w_k/sum(w) pages in whole blocks, but at
// least one block, taking the excess that minimum costs from the largest
// classes so that the total stays within the budget.
func splitClasses(budget int, sizes, weights []int) []classes.Class {
	sum := 0
	for _, w := range weights {
		sum += w
	}
	cs := make([]classes.Class, len(sizes))
	total := 0
	for k, s := range sizes {
		cs[k] = classes.Class{Size: s, Blocks: max(1, budget*weights[k]/sum/s)}
		total += cs[k].Size * cs[k].Blocks
	}
	for k := len(cs) - 1; total > budget && k >= 0; k-- {
		for total > budget && cs[k].Blocks > 1 {
			cs[k].Blocks--
			total -= cs[k].Size
		}
	}
	return cs
}

type runs struct{ p *pages.Pool }

func (r runs) alloc(n int) (any, int, error) {
	run, err := r.p.Alloc(n, pages.DefaultContent)
	return run, n, err
}
func (r runs) free(id any) error { return r.p.Free(id.(pages.Run)) }
func (r runs) state() (int, float64) {
	st := r.p.Stats()
	return st.Used, st.Fragmentation()
}
func (r runs) freePages() int { return r.p.Stats().Free }
func (r runs) close() error   { return r.p.Close() }

type slabs struct {
	c     *classes.DefaultPool
	sizes []int // class sizes in pages, smallest first
}

func (s slabs) alloc(n int) (any, int, error) {
	h, err := s.c.Alloc(n)
	if err != nil {
		return nil, 0, err
	}
	return h, s.sizes[h.Class()], nil
}
func (s slabs) free(id any) error { return s.c.Free(id.(classes.Handle)) }

// state: every free block of a class serves every request of that class,
// so no free page is unusable by the requests its class takes: the
// per-class external fragmentation is 0, and so is their sum.
func (s slabs) state() (int, float64) {
	used := 0
	for _, c := range s.c.Stats().Classes {
		used += c.Live * c.BlockSize
	}
	return used, 0
}
func (s slabs) freePages() int {
	free := 0
	for _, c := range s.c.Stats().Classes {
		free += c.Free * c.BlockSize
	}
	return free
}
func (s slabs) close() error { return s.c.Close() }

type trial struct {
	peak, now, util                    []float64
	attempts, refused, refusedWithRoom int
	requested, handedOut               int
	err                                error
}

// runTrial runs one trial: every operation draws its kind, a size and a
// victim from the stream, whether it uses them or not, so that strategies
// see the same requests.
func runTrial(a allocator, cfg Config, seed uint64) trial {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	tr := trial{peak: make([]float64, cfg.Ops), now: make([]float64, cfg.Ops), util: make([]float64, cfg.Ops)}
	var live []any
	peak := 0.0
	for i := range cfg.Ops {
		doAlloc := rng.Float64() < cfg.AllocProb
		n := 1 + rng.IntN(cfg.MaxPages)
		victim := rng.Float64()
		if doAlloc || len(live) == 0 {
			tr.attempts++
			id, got, err := a.alloc(n)
			switch {
			case err == nil:
				live = append(live, id)
				tr.requested += n
				tr.handedOut += got
			case errors.Is(err, pool.ErrExhausted):
				tr.refused++
				if a.freePages() >= n {
					tr.refusedWithRoom++
				}
			default:
				tr.err = fmt.Errorf("frag: allocating %d pages: %w", n, err)
				return tr
			}
		} else {
			j := int(victim * float64(len(live)))
			if err := a.free(live[j]); err != nil {
				tr.err = fmt.Errorf("frag: freeing: %w", err)
				return tr
			}
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		used, ext := a.state()
		peak = max(peak, ext)
		tr.peak[i], tr.now[i], tr.util[i] = peak, ext, float64(used)/float64(cfg.Pages)
	}
	return tr
}

// checkpoints returns the configured checkpoints, sorted.
func (r *Result) checkpoints() []int {
	cs := slices.Clone(r.Config.Checkpoints)
	slices.Sort(cs)
	return cs
}
