package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// pgModel is the suite's model of a page-run allocator: model.Region,
// with the allocator it drives. Cases drive the allocator through it; it
// checks every result and every eviction as it goes, and Stats when asked.
type pgModel struct {
	*model.Region[pages.Run]
	in    *pagesInst
	psize int
	fit   pages.Fit
	id    uint32 // the allocator's id, from its first run
	types []pages.ContentType
	tag   byte
}

type pgRun = model.Run[pages.Run]

func newPgModel(in *pagesInst) (*pgModel, error) {
	st := in.Stats()
	if st.Pages < pagesMin || st.PageSize <= 0 {
		return nil, &ctorError{fmt.Errorf("the page-run suite needs a region of at least %d pages, got %d pages of %d bytes", pagesMin, st.Pages, st.PageSize)}
	}
	require(st.Fit == pages.BestFit || st.Fit == pages.FirstFit, ErrContract, "Stats().Fit = %v, neither best nor first fit", st.Fit)
	m := &pgModel{in: in, psize: st.PageSize, fit: st.Fit, types: in.cfg.Types}
	if m.types == nil {
		m.types = []pages.ContentType{{Name: "data"}}
	}
	m.Region = model.NewRegion[pages.Run](st.Pages, st.Fit == pages.FirstFit, regionTypes(m.types), in.cfg.High, in.cfg.Low)
	want := m.want()
	if st != want {
		must(violationf(ErrAccounting, "a fresh allocator's Stats differs from one free run of the whole region: %s", fieldDiff(st, want)))
	}
	return m, nil
}

// regionTypes returns what the model needs of content types.
func regionTypes(ts []pages.ContentType) []model.Type {
	out := make([]model.Type, len(ts))
	for i, t := range ts {
		out[i] = model.Type{Priority: t.Priority, Evictable: t.Evictable}
	}
	return out
}

// want returns the Stats the model expects.
func (m *pgModel) want() pages.Stats {
	c := m.Count()
	w := pages.Stats{
		PageSize: m.psize, Pages: m.Pages, Fit: m.fit,
		Used: c.Used, Free: c.Free, LargestFree: c.LargestFree, FreeRuns: c.FreeRuns, Runs: c.Runs, Evictable: c.Evictable,
		Pins: c.Pins, PinnedRuns: c.PinnedRuns,
		Allocs: m.Allocs, Frees: m.Frees, Evictions: m.Evictions, EvictedPages: m.EvictedPages, Failed: m.Failed, Rejected: m.Rejected,
	}
	for i := range m.Types {
		w.Content[i] = pages.ContentStats{Runs: c.ContentRuns[i], Pages: c.ContentPages[i], Evictions: m.ContentEvictions[i]}
	}
	return w
}

// check compares Stats with the model.
func (m *pgModel) check(what string) error {
	if got, want := m.in.Stats(), m.want(); got != want {
		return violationf(ErrAccounting, "%s: Stats differs from the model: %s", what, fieldDiff(got, want))
	}
	if n := m.in.log.stray; n > 0 {
		return violationf(ErrContract, "%s: the EvictFunc was called %d times outside Alloc and Evict", what, n)
	}
	return nil
}

// alloc allocates n pages of content c from the allocator and the model,
// and checks what happened: the evictions, in order; the error; the run's
// place, length, pins, content and memory. When the model agrees that the
// allocation must fail it returns nil.
func (m *pgModel) alloc(n int, c pages.Content) *pgRun {
	what := fmt.Sprintf("Alloc(%d pages, content %d)", n, c)
	room, placed := m.Evicting(n, int(c))
	mark := len(m.in.log.runs)
	r, err := m.in.alloc(n, c)
	m.evictedAs(what, mark, room, !placed || err != nil || m.High == 0)
	if !placed {
		if err == nil {
			must(violationf(ErrAliased, "%s = %v, but no free run holds %d pages (free runs %v): it overlaps live runs", what, r, n, m.Gaps()))
		}
		require(errors.Is(err, pool.ErrExhausted), ErrContract, "%s with no free run that holds it = %v, want pool.ErrExhausted", what, err)
		m.Failed++
		return nil
	}
	if err != nil {
		must(violationf(ErrContract, "%s = %v, but a free run holds it (free runs %v)", what, err, m.Gaps()))
	}
	x := m.place(what, r, n, c)
	if m.High > 0 {
		marked := m.Reclaim()
		m.evictedAs(fmt.Sprintf("%s, leaving %d of %d pages in use (high watermark %d, low %d)", what, m.Used+pagesOf(marked), m.Pages, m.High, m.Low),
			mark+len(room), marked, true)
	}
	return x
}

func pagesOf(xs []*pgRun) int {
	n := 0
	for _, x := range xs {
		n += x.N
	}
	return n
}

// place checks a run the allocator just placed and adds it to the model.
func (m *pgModel) place(what string, r pages.Run, n int, c pages.Content) *pgRun {
	first, got, err := m.in.Span(r)
	require(err == nil, ErrContract, "Span of the run %s returned: %v", what, err)
	require(got == n, ErrContract, "%s placed a run of %d pages", what, got)
	require(first >= 0 && first+n <= m.Pages, ErrContract, "%s placed pages [%d, %d), outside the region of %d", what, first, first+n, m.Pages)
	for p := first; p < first+n; p++ {
		if o := m.Owner[p]; o != nil {
			must(violationf(ErrAliased, "%s placed pages [%d, %d), but page %d belongs to the live run %v at [%d, %d)", what, first, first+n, p, o.Key, o.First, o.First+o.N))
		}
	}
	allowed := m.Allowed(n)
	ok := false
	for _, g := range allowed {
		ok = ok || (g[0] <= first && first+n <= g[0]+g[1])
	}
	if !ok {
		must(violationf(ErrContract, "%s placed pages [%d, %d); %v allows the free runs %v (as (first, length)) of the free runs %v", what, first, first+n, m.fit, allowed, m.Gaps()))
	}
	_, dup := m.ByKey[r]
	require(!dup, ErrDuplicated, "%s returned %v, a live run's handle", what, r)
	id := runPool(r)
	if m.id == 0 {
		m.id = id
	}
	require(id == m.id, ErrContract, "%s returned a run of allocator id %d, earlier runs carry %d", what, id, m.id)
	buf, err := m.in.Bytes(r)
	require(err == nil && len(buf) == n*m.psize && cap(buf) == len(buf), ErrContract, "Bytes of the run %s returned: %d bytes, capacity %d, %v; want %d bytes, no spare capacity", what, len(buf), cap(buf), err, n*m.psize)
	pins, err := m.in.Pins(r)
	require(pins == 1 && err == nil, ErrContract, "the run %s returned has %d pins (%v), want 1", what, pins, err)
	cont, err := m.in.Content(r)
	require(cont == c && err == nil, ErrContract, "Content of the run %s returned = %d, %v", what, cont, err)
	m.tag++
	stamp(buf, m.psize, m.tag)
	return m.Add(r, first, n, int(c), m.tag)
}

// evictedAs checks the evictions the EvictFunc heard from mark on against
// want; with exact, nothing more may follow.
func (m *pgModel) evictedAs(what string, mark int, want []*pgRun, exact bool) {
	l := m.in.log
	must(l.err)
	got := l.runs[mark:]
	for i, v := range want {
		if i >= len(got) {
			_, _, err := m.in.Span(v.Key)
			require(err == nil, ErrLost, "%s evicted %v (content %d, %d pages) without telling the EvictFunc", what, v.Key, v.C, v.N)
			must(violationf(ErrContract, "%s evicted %d runs, want %d: %v (content %d, %d pages, unpinned at %d) was due next", what, len(got), len(want), v.Key, v.C, v.N, v.Since))
		}
		if got[i] != v.Key {
			must(m.wrongVictim(what, got[i], v))
		}
		c := l.conts[mark+i]
		require(c == pages.Content(v.C), ErrContract, "%s: the EvictFunc was told %v holds content %d; it holds %d", what, v.Key, c, v.C)
	}
	if exact && len(got) > len(want) {
		must(m.wrongVictim(what, got[len(want)], nil))
	}
}

// wrongVictim says why evicting x, instead of due (nil: nothing), breaks
// the contract.
func (m *pgModel) wrongVictim(what string, x pages.Run, due *pgRun) error {
	dueS := "nothing more was due"
	if due != nil {
		dueS = fmt.Sprintf("%v (content %d, priority %d, unpinned at %d) was due", due.Key, due.C, m.types[due.C].Priority, due.Since)
	}
	if o, ok := m.Dropped[x]; ok {
		return violationf(ErrOrder, "%s evicted %v (content %d, priority %d, unpinned at %d) before its turn; %s", what, x, o.C, m.types[o.C].Priority, o.Since, dueS)
	}
	o, live := m.ByKey[x]
	switch {
	case !live:
		return violationf(ErrContract, "%s: the EvictFunc was told of %v, which is not a live run; %s", what, x, dueS)
	case o.Pins > 0:
		return violationf(ErrContract, "%s evicted %v, pinned %d times; %s", what, x, o.Pins, dueS)
	case !m.types[o.C].Evictable:
		return violationf(ErrContract, "%s evicted %v of content %d, which is not evictable; %s", what, x, o.C, dueS)
	case due == nil:
		return violationf(ErrContract, "%s evicted %v (content %d, priority %d) as well; %s", what, x, o.C, m.types[o.C].Priority, dueS)
	}
	return violationf(ErrOrder, "%s evicted %v (content %d, priority %d, unpinned at %d); %s", what, x, o.C, m.types[o.C].Priority, o.Since, dueS)
}

// gone returns the model's record of a run the allocator is evicting: the
// model drops the victims of an allocation that does not fit before the
// call, those of the watermarks after it.
func (m *pgModel) gone(run pages.Run) (*pgRun, bool) {
	if x, ok := m.Dropped[run]; ok {
		return x, true
	}
	x, ok := m.ByKey[run]
	return x, ok
}

// intact checks that x's memory kept what the model wrote.
func (m *pgModel) intact(x *pgRun) error {
	buf, err := m.in.Bytes(x.Key)
	if err != nil {
		return violationf(ErrContract, "Bytes of the live run %v: %v", x.Key, err)
	}
	if at, ok := stamped(buf, m.psize, x.Tag); !ok {
		return violationf(ErrAliased, "byte %d of the live run %v at pages [%d, %d) changed: another run shares its memory", at, x.Key, x.First, x.First+x.N)
	}
	return nil
}

func (m *pgModel) free(x *pgRun) {
	must(m.intact(x))
	if err := m.in.Free(x.Key); err != nil {
		mustOK(fmt.Sprintf("Free of the live run %v", x.Key), err)
	}
	m.Drop(x, false)
}

func (m *pgModel) pin(x *pgRun) {
	if err := m.in.Pin(x.Key); err != nil {
		mustOK(fmt.Sprintf("Pin of the live run %v", x.Key), err)
	}
	x.Pins++
}

// unpin unpins x, or checks that Unpin refuses an unpinned x.
func (m *pgModel) unpin(x *pgRun) {
	err := m.in.Unpin(x.Key)
	if x.Pins == 0 {
		require(errors.Is(err, pages.ErrNotPinned) && errors.Is(err, pool.ErrInvalidArgument), ErrContract, "Unpin of the unpinned run %v = %v, want pages.ErrNotPinned", x.Key, err)
		return
	}
	if err != nil {
		mustOK(fmt.Sprintf("Unpin of %v, pinned %d times", x.Key, x.Pins), err)
	}
	m.Unpin(x)
}

// evict calls Evict(n) and checks what it evicted and returned.
func (m *pgModel) evict(n int) {
	want, got := m.Evict(n)
	mark := len(m.in.log.runs)
	k, err := m.in.evict(n)
	what := fmt.Sprintf("Evict(%d)", n)
	mustOK(what, err)
	m.evictedAs(what, mark, want, true)
	require(k == got, ErrContract, "%s = %d, it evicted %d pages", what, k, got)
}

// refused checks that every call with r is refused with want, as a handle
// error, and counts the refusals.
func (m *pgModel) refused(what string, r pages.Run, want error) {
	in := m.in
	_, pinsErr := in.Pins(r)
	buf, bytesErr := in.Bytes(r)
	_, _, spanErr := in.Span(r)
	_, contErr := in.Content(r)
	calls := [...]call{
		{"Pins", pinsErr}, {"Bytes", bytesErr}, {"Span", spanErr}, {"Content", contErr},
		{"Pin", in.Pin(r)}, {"Unpin", in.Unpin(r)}, {"Free", in.Free(r)},
	}
	for _, c := range calls {
		require(c.err != nil, ErrAliased, "%s of %s (%v) was accepted", c.name, what, r)
		require(errors.Is(c.err, want) && errors.Is(c.err, pool.ErrInvalidHandle), ErrContract, "%s of %s (%v) = %v, want %v", c.name, what, r, c.err, want)
	}
	require(buf == nil, ErrAliased, "Bytes of %s (%v) returned %d bytes with its error", what, r, len(buf))
	m.Rejected += uint64(len(calls))
}

// refusedOnce makes one call with the stale run r, on path 0 to 3.
func (m *pgModel) refusedOnce(path int, r pages.Run) {
	in := m.in
	var err error
	name := ""
	switch path {
	case 0:
		name, err = "Free", in.Free(r)
	case 1:
		name, err = "Pin", in.Pin(r)
	case 2:
		name, err = "Unpin", in.Unpin(r)
	default:
		name = "Span"
		_, _, err = in.Span(r)
	}
	require(errors.Is(err, pool.ErrStaleHandle), ErrAliased, "%s of the stale run %v = %v, want pool.ErrStaleHandle", name, r, err)
	m.Rejected++
}

// churn drives steps random operations through the model: allocations of
// every content type, frees, pins, unpins, evictions and stale calls. after
// runs after every step.
func (m *pgModel) churn(r *pgCase, rng *rand.Rand, steps int, after func(step int)) {
	for step := range steps {
		require(r.ctx.Err() == nil, ErrDeadlock, "step %d: stopped by the watchdog", step)
		during(func() {
			switch op := m.Next(rng); op.Kind {
			case model.RegionAlloc:
				m.alloc(op.N, pages.Content(op.C))
			case model.RegionFree:
				m.free(op.Run)
			case model.RegionPin:
				m.pin(op.Run)
			case model.RegionUnpin:
				m.unpin(op.Run)
			case model.RegionEvict:
				m.evict(op.N)
			case model.RegionStale:
				m.refusedOnce(op.Path, op.Key)
			case model.RegionRead:
				must(m.intact(op.Run))
			}
			if after != nil {
				after(step)
			}
		}, "step %d", step)
	}
}

// fill fills the region with runs of the lengths and content next draws
// (given the pages left), calling after, if set, on each.
func (m *pgModel) fill(next func(left int) (int, pages.Content), after func(*pgRun)) {
	for m.Used < m.Pages {
		x := m.alloc(next(m.Pages - m.Used))
		if after != nil {
			after(x)
		}
	}
}

// unpinIf returns an after for fill that unpins the runs yes says.
func (m *pgModel) unpinIf(yes func() bool) func(*pgRun) {
	return func(x *pgRun) {
		if yes() {
			m.unpin(x)
		}
	}
}

// rounds runs body n times, checking Stats and freeing every run after
// each.
func (m *pgModel) rounds(n int, body func(round int)) {
	for round := range n {
		body(round)
		must(m.check(fmt.Sprintf("round %d", round)))
		m.freeAll()
	}
}

// freeAll frees every live run.
func (m *pgModel) freeAll() {
	for len(m.Live) > 0 {
		m.free(m.Live[len(m.Live)-1])
	}
}
