package metrics_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/metrics"
)

// Wiring locus into a server: Prometheus metrics of the pool, the kv
// manager and the event publisher, and the manager's cache events in
// vLLM's format for KV-cache-aware routers.
func Example() {
	p, _ := locus.Default(locus.WithBlocks(1024))
	defer p.Close()
	pub, _ := events.New("tcp://127.0.0.1:0", events.WithTopic(events.Topic("pod-0", "llama-3-8b")))
	m, _ := kv.New(p, kv.WithSubscriber(pub.Subscriber()))

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		metrics.NewPool("kv", p),
		metrics.NewManager("kv", m),
		metrics.NewPublisher("kv", pub),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux) // a server: http.ListenAndServe("127.0.0.1:9090", mux)
	defer srv.Close()

	// One scheduling step of the serving loop.
	id, _, _ := m.Admit(make([]uint32, 40), kv.Key{})
	_ = m.Release(id) // a worker would use a kv.Releaser
	_, _ = m.Drain()  // applies releases; publishes the manager's counts
	_, _ = p.Drain()  // publishes the pool's counts
	pub.Flush()       // the step's cache events go out as one batch

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "locus_kv_blocks") || strings.HasPrefix(l, "locus_pool_blocks") {
			fmt.Println(l)
		}
	}

	_ = m.Close()
	_ = pub.Close()
	// Output:
	// locus_kv_blocks{manager="kv",state="cached"} 2
	// locus_kv_blocks{manager="kv",state="free"} 1022
	// locus_kv_blocks{manager="kv",state="in_use"} 0
	// locus_kv_blocks{manager="kv",state="pinned"} 0
	// locus_pool_blocks{pool="kv",state="free"} 1022
	// locus_pool_blocks{pool="kv",state="in_use"} 2
}
