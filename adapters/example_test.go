package adapters_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
)

// One pages region holds the KV cache and the adapters; an acquired
// adapter is one contiguous run of the adapter content type, released by
// a worker through a Releaser and applied by the owner's Drain.
func Example() {
	const page = 4096
	b, _ := heap.New(256*page, 1)
	var m *adapters.Manager
	hot, _ := pages.New(b, page,
		pages.WithContentTypes(
			pages.ContentType{Name: "kv", Priority: 0, Evictable: true},
			pages.ContentType{Name: "adapter", Priority: 1, Evictable: true},
		),
		pages.WithEvictFunc(func(r pages.Run, c pages.Content) {
			if m.Evicted(r, c) {
				return
			}
			// a KV run: drop it from its block table
		}))
	defer hot.Close()
	m, err := adapters.New(hot, 1, adapters.WithHotBudget(8, 0), adapters.WithWarm(1<<20, 0, 0))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	weights := make([]byte, 40000)
	load, _ := adapters.Func(int64(len(weights)), func(dst []byte) (int, error) { return copy(dst, weights), nil })
	_ = m.Register("sql-lora", load)
	kv, _ := hot.Alloc(16, 0) // KV blocks in the same region

	h, _ := m.Acquire("sql-lora")
	w, _ := m.Bytes(h)
	res, _ := m.Residency("sql-lora")
	fmt.Println(len(w), res, hot.Stats().Content[1].Pages, "pages of adapter beside", hot.Stats().Content[0].Pages, "of KV")

	r, _ := m.NewReleaser() // one per worker
	done := make(chan struct{})
	go func() { _ = r.Release(h); close(done) }()
	<-done
	_, _ = m.Drain(nil)
	_ = hot.Free(kv)
	st := m.Stats()
	fmt.Println("held", st.Held, "hot", st.Hot.Adapters, "cold loads", st.ColdLoads)
	// Output:
	// 40000 hot 10 pages of adapter beside 16 of KV
	// held 0 hot 1 cold loads 1
}

// A Batcher mixes adapters in one batch, at most MaxAdapters of them,
// hot ones first.
func ExampleBatcher() {
	b, _ := heap.New(64*4096, 1)
	hot, _ := pages.New(b, 4096, pages.WithContentTypes(pages.ContentType{Name: "adapter"}))
	defer hot.Close()
	m, _ := adapters.New(hot, 0)
	defer m.Close()
	for _, id := range []string{"a", "b", "c"} {
		l, _ := adapters.Func(4096, func(dst []byte) (int, error) { return len(dst), nil })
		_ = m.Register(id, l)
	}
	bt, _ := adapters.NewBatcher(m, adapters.BatchConfig{MaxAdapters: 2, NoPrefetch: true})
	for i, id := range []string{"a", "b", "b", "c", "c", "c"} {
		_ = bt.Enqueue(adapters.Request{Seq: uint64(i), Adapter: id})
	}
	var batch adapters.Batch
	_ = bt.Next(&batch)
	fmt.Println(batch.Adapters, len(batch.Requests), "requests,", batch.Loads, "loads")
	_ = bt.Release(&batch)
	_ = bt.Next(&batch)
	fmt.Println(batch.Adapters, len(batch.Requests), "requests,", batch.Hits, "hits")
	_ = bt.Release(&batch)
	// Output:
	// [c b] 5 requests, 2 loads
	// [a] 1 requests, 0 hits
}

// A disk cold tier: an adapter loaded from its Loader twice is admitted,
// stored as blocks of a preallocated file of checksummed slots when it
// goes cold (the copy runs on the tier's workers, applied by Drain), and
// its next load reads the file instead of the Loader.
func Example_coldTier() {
	dir, _ := os.MkdirTemp("", "adapters-example")
	defer os.RemoveAll(dir)
	d, err := disk.Open(filepath.Join(dir, "adapters.tier"), 64<<10, 64) // 64 blocks of 64 KiB
	if err != nil {
		panic(err)
	}
	cold, err := tier.New(d)
	if err != nil {
		panic(err)
	}
	defer cold.Close() // after the Manager

	b, _ := heap.New(64*4096, 1)
	hot, _ := pages.New(b, 4096, pages.WithContentTypes(pages.ContentType{Name: "adapter"}))
	defer hot.Close()
	m, err := adapters.New(hot, 0, adapters.WithHotBudget(1, 0), adapters.WithCold(cold, 2))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	loads := 0 // of the Loader: a slow remote store, say
	for _, id := range []string{"a", "b"} {
		l, _ := adapters.Func(100_000, func(dst []byte) (int, error) { loads++; return len(dst), nil })
		_ = m.Register(id, l)
	}
	use := func(id string) {
		h, _ := m.Acquire(id) // the other one goes cold
		_ = m.Release(h)
	}
	for _, id := range []string{"a", "b", "a", "b"} { // a goes cold twice: admitted the second time
		use(id)
	}
	for m.Stats().ColdStoring > 0 {
		_, _ = m.Drain(nil) // once per step in an engine
	}
	st := m.Stats()
	fmt.Println("rejected", st.ColdTierRejected, "stored", st.ColdTierStores, "in", st.ColdTier.Pages, "blocks")
	use("a") // b goes cold: stored too
	st = m.Stats()
	fmt.Println("loads: from the Loader", loads, "from the cold tier", st.ColdTierLoads)
	// Output:
	// rejected 2 stored 1 in 2 blocks
	// loads: from the Loader 4 from the cold tier 1
}
