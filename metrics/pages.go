package metrics

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// PagesSource is what NewPages reads: *pages.Pool is one.
type PagesSource interface {
	Snapshot() pages.Stats
	ContentTypes() []pages.ContentType
}

// NewPages returns a collector of a page pool's accounting, labelled
// pool=name, with a content label on per-content metrics: the content
// type's name, or its index in decimal ("2") when it has none. The content
// types are read here, once, and their labels must be unique: a name given
// twice, a name that is the index of an unnamed type (a type named "1"
// beside an unnamed second type), or a name that is not UTF-8 makes a
// collector whose registration fails with an error matching
// pool.ErrInvalidConfig, as a nil p does; name the types distinctly, or
// leave them all unnamed. Every scrape reads p.Snapshot once (published at
// the owner's Stats, and at its next Alloc, Free, Pin, Unpin or Evict when
// the scrape asked).
//
// Its metrics:
//
//	locus_pages_region_pages{state="used"|"free"}  gauge: they sum to the pages of the region
//	locus_pages_page_size_bytes                    gauge
//	locus_pages_utilization_ratio                  gauge: used / pages
//	locus_pages_largest_free_run_pages             gauge
//	locus_pages_free_runs                          gauge: maximal free runs
//	locus_pages_fragmentation_ratio                gauge: 1 - largest free run / free pages
//	locus_pages_runs                               gauge: allocated runs
//	locus_pages_evictable_pages                    gauge: pages in unpinned runs of evictable content
//	locus_pages_pins                               gauge: pins held
//	locus_pages_pinned_runs                        gauge
//	locus_pages_allocated_runs_total               counter
//	locus_pages_freed_runs_total                   counter
//	locus_pages_evicted_runs_total                 counter
//	locus_pages_evicted_pages_total                counter
//	locus_pages_failed_allocations_total           counter: allocations refused for lack of room
//	locus_pages_rejected_runs_total                counter: stale, double-freed, foreign, zero or out of range
//	locus_pages_content_runs{content}              gauge
//	locus_pages_content_pages{content}             gauge
//	locus_pages_content_evicted_runs_total{content}  counter
func NewPages(name string, p PagesSource) prometheus.Collector {
	var families []family[pages.Stats]
	if !typednil.Is(p) {
		labels, err := contentLabels(p.ContentTypes())
		if err != nil {
			return invalidCollector{prometheus.NewInvalidDesc(fmt.Errorf("%w: locus/metrics: pages %q: %w", pool.ErrInvalidConfig, name, err))}
		}
		families = slices.Concat(pagesFamilies, contentFamilies(labels))
	}
	return newCollector[pages.Stats]("pages", "pool", name, p, families)
}

// invalidCollector is a collector whose registration fails with its
// description's error.
type invalidCollector struct{ desc *prometheus.Desc }

func (c invalidCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c invalidCollector) Collect(chan<- prometheus.Metric)    {}

// contentLabels returns the content label of every type (at most
// pages.MaxContentTypes): its name, or its index when it has none. Two
// equal labels would make two series of one family with the same labels,
// and a label that is not UTF-8 cannot be encoded: either fails every
// scrape, so they are refused here.
func contentLabels(types []pages.ContentType) ([]string, error) {
	labels := make([]string, min(len(types), pages.MaxContentTypes))
	first := make(map[string]int, len(labels))
	for i := range labels {
		if labels[i] = types[i].Name; labels[i] == "" {
			labels[i] = strconv.Itoa(i)
		}
		if !utf8.ValidString(labels[i]) {
			return nil, fmt.Errorf("content type %d: name %q is not UTF-8", i, labels[i])
		}
		if j, dup := first[labels[i]]; dup {
			return nil, fmt.Errorf("content types %d and %d are both labelled %q (an unnamed type is labelled by its index)", j, i, labels[i])
		}
		first[labels[i]] = i
	}
	return labels, nil
}

var pagesFamilies = []family[pages.Stats]{
	{"region_pages", "Pages of the region by state: used (in allocated runs) or free.", []string{"state"},
		func(w *writer, s pages.Stats) {
			w.gauge(float64(s.Used), "used")
			w.gauge(float64(s.Free), "free")
		}},
	{"page_size_bytes", "Size of a page.", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.PageSize)) }},
	{"utilization_ratio", "Share of the pages in allocated runs.", nil,
		func(w *writer, s pages.Stats) { w.gauge(s.Utilization()) }},
	{"largest_free_run_pages", "Pages in the longest free run.", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.LargestFree)) }},
	{"free_runs", "Free runs (free neighbours are always merged).", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.FreeRuns)) }},
	{"fragmentation_ratio", "External fragmentation of the free pages: 1 - largest free run / free pages.", nil,
		func(w *writer, s pages.Stats) { w.gauge(s.Fragmentation()) }},
	{"runs", "Allocated runs.", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.Runs)) }},
	{"evictable_pages", "Pages in unpinned runs of evictable content.", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.Evictable)) }},
	{"pins", "Pins held, summed over the runs.", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.Pins)) }},
	{"pinned_runs", "Runs with at least one pin.", nil,
		func(w *writer, s pages.Stats) { w.gauge(float64(s.PinnedRuns)) }},
	{"allocated_runs_total", "Runs handed out.", nil,
		func(w *writer, s pages.Stats) { w.counter(s.Allocs) }},
	{"freed_runs_total", "Runs freed.", nil,
		func(w *writer, s pages.Stats) { w.counter(s.Frees) }},
	{"evicted_runs_total", "Runs evicted.", nil,
		func(w *writer, s pages.Stats) { w.counter(s.Evictions) }},
	{"evicted_pages_total", "Pages of the runs evicted.", nil,
		func(w *writer, s pages.Stats) { w.counter(s.EvictedPages) }},
	{"failed_allocations_total", "Allocations refused for lack of room.", nil,
		func(w *writer, s pages.Stats) { w.counter(s.Failed) }},
	{"rejected_runs_total", "Runs refused: stale, double-freed, foreign, zero or out of range.", nil,
		func(w *writer, s pages.Stats) { w.counter(s.Rejected) }},
}

// contentFamilies returns the per-content families of a pool whose content
// types have the given labels.
func contentFamilies(names []string) []family[pages.Stats] {
	perContent := func(s pages.Stats, yield func(string, pages.ContentStats)) {
		for i, n := range names {
			yield(n, s.Content[i])
		}
	}
	return each("content", []family[pages.ContentStats]{
		{"content_runs", "Allocated runs of a content type.", nil,
			func(w *writer, c pages.ContentStats) { w.gauge(float64(c.Runs)) }},
		{"content_pages", "Pages in the allocated runs of a content type.", nil,
			func(w *writer, c pages.ContentStats) { w.gauge(float64(c.Pages)) }},
		{"content_evicted_runs_total", "Runs of a content type evicted.", nil,
			func(w *writer, c pages.ContentStats) { w.counter(c.Evictions) }},
	}, perContent)
}
