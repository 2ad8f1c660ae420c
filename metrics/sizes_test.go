package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// A scripted sequence over two size classes: each class's pool metrics
// carry its block size as the class label, beside the bytes asked for and
// handed out.
func TestClasses(t *testing.T) {
	c, err := classes.Default([]classes.Class{{Size: 64, Blocks: 4}, {Size: 256, Blocks: 2}})
	require.NoError(t, err)
	defer c.Close()
	h1, err := c.Alloc(10)
	require.NoError(t, err)
	_, err = c.Alloc(64)
	require.NoError(t, err)
	_, err = c.Alloc(100) // the 256-byte class
	require.NoError(t, err)
	require.NoError(t, c.Free(h1))
	_, err = c.Drain() // one empty drain per class
	require.NoError(t, err)

	col := metrics.NewClasses("sizes", c)
	want := `
# HELP locus_classes_allocated_blocks_total Blocks handed out.
# TYPE locus_classes_allocated_blocks_total counter
locus_classes_allocated_blocks_total{class="256",pool="sizes"} 1
locus_classes_allocated_blocks_total{class="64",pool="sizes"} 2
# HELP locus_classes_blocks Blocks of the pool by state: free, or in_use (allocated and not yet freed back).
# TYPE locus_classes_blocks gauge
locus_classes_blocks{class="256",pool="sizes",state="free"} 1
locus_classes_blocks{class="256",pool="sizes",state="in_use"} 1
locus_classes_blocks{class="64",pool="sizes",state="free"} 3
locus_classes_blocks{class="64",pool="sizes",state="in_use"} 1
# HELP locus_classes_drain_size_handles Handles taken out of the transport per drain.
# TYPE locus_classes_drain_size_handles histogram
` + buckets("locus_classes_drain_size_handles", `class="256",pool="sizes"`, map[float64]uint64{0: 1}, 1) + `
locus_classes_drain_size_handles_sum{class="256",pool="sizes"} 0
locus_classes_drain_size_handles_count{class="256",pool="sizes"} 1
` + buckets("locus_classes_drain_size_handles", `class="64",pool="sizes"`, map[float64]uint64{0: 1}, 1) + `
locus_classes_drain_size_handles_sum{class="64",pool="sizes"} 0
locus_classes_drain_size_handles_count{class="64",pool="sizes"} 1
# HELP locus_classes_handed_out_bytes_total Bytes a class handed out: its allocations times its block size.
# TYPE locus_classes_handed_out_bytes_total counter
locus_classes_handed_out_bytes_total{class="256",pool="sizes"} 256
locus_classes_handed_out_bytes_total{class="64",pool="sizes"} 128
# HELP locus_classes_requested_bytes_total Bytes the allocations of a class asked for.
# TYPE locus_classes_requested_bytes_total counter
locus_classes_requested_bytes_total{class="256",pool="sizes"} 100
locus_classes_requested_bytes_total{class="64",pool="sizes"} 74
# HELP locus_classes_unknown_class_handles_total Handles refused because they name no class of the allocator.
# TYPE locus_classes_unknown_class_handles_total counter
locus_classes_unknown_class_handles_total{pool="sizes"} 0
`
	c.Stats() // the owner publishes
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(want),
		"locus_classes_allocated_blocks_total", "locus_classes_blocks", "locus_classes_drain_size_handles",
		"locus_classes_handed_out_bytes_total", "locus_classes_requested_bytes_total",
		"locus_classes_unknown_class_handles_total"))
	// Per class: the pool's nine families (blocks by two states), and two
	// of bytes; one of unknown handles.
	require.Equal(t, 2*(10+2)+1, testutil.CollectAndCount(col))
	lint(t, col)
}

// A scripted sequence over a page pool with two named content types and an
// unnamed one: eviction, pins, a failed allocation.
func TestPages(t *testing.T) {
	b, err := heap.New(16*4096, 1)
	require.NoError(t, err)
	const weights, kv pages.Content = 0, 1
	p, err := pages.New(b, 4096, pages.WithContentTypes(
		pages.ContentType{Name: "weights", Priority: 10},
		pages.ContentType{Name: "kv", Priority: 1, Evictable: true},
		pages.ContentType{},
	), pages.WithEvictFunc(func(pages.Run, pages.Content) {}))
	require.NoError(t, err)
	defer p.Close()
	a, err := p.Alloc(4, weights) // pages 0-3
	require.NoError(t, err)
	k1, err := p.Alloc(4, kv) // 4-7
	require.NoError(t, err)
	require.NoError(t, p.Unpin(k1)) // runs are handed out pinned once
	k2, err := p.Alloc(4, kv)       // 8-11
	require.NoError(t, err)
	require.NoError(t, p.Pin(k2)) // pinned twice
	require.NoError(t, p.Free(a)) // free: 0-3 and 12-15
	p.Stats()
	col := metrics.NewPages("region", p)
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(`
# HELP locus_pages_fragmentation_ratio External fragmentation of the free pages: 1 - largest free run / free pages.
# TYPE locus_pages_fragmentation_ratio gauge
locus_pages_fragmentation_ratio{pool="region"} 0.5
# HELP locus_pages_free_runs Free runs (free neighbours are always merged).
# TYPE locus_pages_free_runs gauge
locus_pages_free_runs{pool="region"} 2
`), "locus_pages_fragmentation_ratio", "locus_pages_free_runs"))

	r, err := p.Alloc(8, kv) // evicts 4-7, which merges 0-7
	require.NoError(t, err)
	require.NoError(t, p.Unpin(r))
	_, err = p.Alloc(16, weights) // 4 free and 8 evictable pages: refused
	require.ErrorIs(t, err, pool.ErrExhausted)
	p.Stats()
	want := `
# HELP locus_pages_allocated_runs_total Runs handed out.
# TYPE locus_pages_allocated_runs_total counter
locus_pages_allocated_runs_total{pool="region"} 4
# HELP locus_pages_content_evicted_runs_total Runs of a content type evicted.
# TYPE locus_pages_content_evicted_runs_total counter
locus_pages_content_evicted_runs_total{content="2",pool="region"} 0
locus_pages_content_evicted_runs_total{content="kv",pool="region"} 1
locus_pages_content_evicted_runs_total{content="weights",pool="region"} 0
# HELP locus_pages_content_pages Pages in the allocated runs of a content type.
# TYPE locus_pages_content_pages gauge
locus_pages_content_pages{content="2",pool="region"} 0
locus_pages_content_pages{content="kv",pool="region"} 12
locus_pages_content_pages{content="weights",pool="region"} 0
# HELP locus_pages_content_runs Allocated runs of a content type.
# TYPE locus_pages_content_runs gauge
locus_pages_content_runs{content="2",pool="region"} 0
locus_pages_content_runs{content="kv",pool="region"} 2
locus_pages_content_runs{content="weights",pool="region"} 0
# HELP locus_pages_evictable_pages Pages in unpinned runs of evictable content.
# TYPE locus_pages_evictable_pages gauge
locus_pages_evictable_pages{pool="region"} 8
# HELP locus_pages_evicted_pages_total Pages of the runs evicted.
# TYPE locus_pages_evicted_pages_total counter
locus_pages_evicted_pages_total{pool="region"} 4
# HELP locus_pages_evicted_runs_total Runs evicted.
# TYPE locus_pages_evicted_runs_total counter
locus_pages_evicted_runs_total{pool="region"} 1
# HELP locus_pages_failed_allocations_total Allocations refused for lack of room.
# TYPE locus_pages_failed_allocations_total counter
locus_pages_failed_allocations_total{pool="region"} 1
# HELP locus_pages_fragmentation_ratio External fragmentation of the free pages: 1 - largest free run / free pages.
# TYPE locus_pages_fragmentation_ratio gauge
locus_pages_fragmentation_ratio{pool="region"} 0
# HELP locus_pages_free_runs Free runs (free neighbours are always merged).
# TYPE locus_pages_free_runs gauge
locus_pages_free_runs{pool="region"} 1
# HELP locus_pages_freed_runs_total Runs freed.
# TYPE locus_pages_freed_runs_total counter
locus_pages_freed_runs_total{pool="region"} 1
# HELP locus_pages_largest_free_run_pages Pages in the longest free run.
# TYPE locus_pages_largest_free_run_pages gauge
locus_pages_largest_free_run_pages{pool="region"} 4
# HELP locus_pages_page_size_bytes Size of a page.
# TYPE locus_pages_page_size_bytes gauge
locus_pages_page_size_bytes{pool="region"} 4096
# HELP locus_pages_pinned_runs Runs with at least one pin.
# TYPE locus_pages_pinned_runs gauge
locus_pages_pinned_runs{pool="region"} 1
# HELP locus_pages_pins Pins held, summed over the runs.
# TYPE locus_pages_pins gauge
locus_pages_pins{pool="region"} 2
# HELP locus_pages_region_pages Pages of the region by state: used (in allocated runs) or free.
# TYPE locus_pages_region_pages gauge
locus_pages_region_pages{pool="region",state="free"} 4
locus_pages_region_pages{pool="region",state="used"} 12
# HELP locus_pages_rejected_runs_total Runs refused: stale, double-freed, foreign, zero or out of range.
# TYPE locus_pages_rejected_runs_total counter
locus_pages_rejected_runs_total{pool="region"} 0
# HELP locus_pages_runs Allocated runs.
# TYPE locus_pages_runs gauge
locus_pages_runs{pool="region"} 2
# HELP locus_pages_utilization_ratio Share of the pages in allocated runs.
# TYPE locus_pages_utilization_ratio gauge
locus_pages_utilization_ratio{pool="region"} 0.75
`
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(want)))
	lint(t, col)
}

// Content labels are unique: an unnamed type is labelled by its index, so a
// name that is another type's index, a name given twice, or a name that is
// not UTF-8 would make two series (or an unencodable one) and fail every
// scrape; NewPages refuses them at registration instead.
func TestPagesContentLabels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		types []pages.ContentType
		ok    bool
	}{
		{"named and unnamed", []pages.ContentType{{Name: "weights"}, {}, {Name: "kv"}}, true},
		{"a name that is its own index", []pages.ContentType{{Name: "0"}, {}}, true},
		{"a name that is an unnamed type's index", []pages.ContentType{{Name: "1"}, {}}, false},
		{"a name given twice", []pages.ContentType{{Name: "kv"}, {Name: "weights"}, {Name: "kv"}}, false},
		{"not UTF-8", []pages.ContentType{{Name: "kv\xff"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := heap.New(4*4096, 1)
			require.NoError(t, err)
			p, err := pages.New(b, 4096, pages.WithContentTypes(tc.types...))
			require.NoError(t, err)
			defer p.Close()
			reg := prometheus.NewRegistry()
			err = reg.Register(metrics.NewPages("p", p))
			if !tc.ok {
				require.ErrorIs(t, err, pool.ErrInvalidConfig)
				return
			}
			require.NoError(t, err)
			_, err = reg.Gather() // every scrape failed on a label collision
			require.NoError(t, err)
			// 16 families of the pool (region pages by two states), 3 per type.
			require.Equal(t, 17+3*len(tc.types), testutil.CollectAndCount(metrics.NewPages("p", p)))
			lint(t, metrics.NewPages("p", p))
		})
	}
}
