package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

func TestServeBalances(t *testing.T) {
	for _, c := range []config{
		{requests: 64, workers: 4, arrivals: 8, blocks: 4096, tokensPerBlock: 16, prompt: 256, decode: 64},
		// A pool too small for every request at once: admissions wait.
		{requests: 64, workers: 2, arrivals: 16, blocks: 128, tokensPerBlock: 16, prompt: 64, decode: 32},
	} {
		var out strings.Builder
		if err := serve(&out, c, &observer{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "0 live") || !strings.Contains(out.String(), "0 rejected") {
			t.Fatalf("unbalanced:\n%s", out.String())
		}
	}
}

func TestServeSharedSavesBlocks(t *testing.T) {
	for _, c := range []config{
		{requests: 64, workers: 4, arrivals: 8, blocks: 4096, tokensPerBlock: 16, prompt: 64, decode: 32, system: 512, prompts: 2},
		// A pool too small for every request at once: admissions wait and
		// cached system prompts are evicted and recomputed.
		{requests: 48, workers: 2, arrivals: 16, blocks: 160, tokensPerBlock: 16, prompt: 32, decode: 16, system: 256, prompts: 3},
	} {
		var out strings.Builder
		if err := serveShared(&out, c, &observer{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "0 live, 0 blocks in use") || !strings.Contains(out.String(), "% saved") {
			t.Fatalf("unbalanced:\n%s", out.String())
		}
	}
}

// The shared scenario with metrics and events: a scraper reads /metrics
// over HTTP on the loopback interface while the loop runs, and the last
// scrape shows the run's final accounting.
func TestServeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, addr, err := serveMetrics("127.0.0.1:0", false, reg)
	require.NoError(t, err)
	defer srv.Close()
	url := "http://" + addr.String() + "/metrics"

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // scrape while the loop runs
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := scrape(url); err != nil {
				t.Error(err)
				return
			}
		}
	})
	c := config{requests: 48, workers: 2, arrivals: 8, blocks: 512, tokensPerBlock: 16, prompt: 32, decode: 16, system: 256, prompts: 2}
	o := &observer{reg: reg, events: "tcp://127.0.0.1:0", topic: "kv@test@toy"}
	var out strings.Builder
	require.NoError(t, serveShared(&out, c, o))
	close(stop)
	wg.Wait()
	require.NoError(t, o.close(&out))
	require.Contains(t, out.String(), "0 batches dropped")

	mfs, err := scrape(url)
	require.NoError(t, err)
	value := func(name string, labels ...string) float64 {
		t.Helper()
		mf, ok := mfs[name]
		require.True(t, ok, "no %s in the scrape", name)
	metric:
		for _, m := range mf.Metric {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, l := range m.Label {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
		t.Fatalf("no %s%v in the scrape", name, labels)
		return 0
	}
	require.Equal(t, float64(c.requests), value("locus_kv_releases_total", "manager", "kv", "via", "releaser"))
	require.Zero(t, value("locus_kv_sequences"))
	require.Zero(t, value("locus_kv_blocks", "state", "in_use"))
	require.Positive(t, value("locus_kv_prefix_hit_tokens_total"))
	require.Equal(t, float64(c.blocks), value("locus_kv_blocks", "state", "free")+value("locus_kv_blocks", "state", "cached"))
	require.Positive(t, value("locus_pool_allocated_blocks_total", "pool", "kv"))
	require.Equal(t, value("locus_pool_allocated_blocks_total"), value("locus_pool_freed_blocks_total")+value("locus_pool_blocks", "state", "in_use"))
	require.Zero(t, value("locus_pool_blocks", "state", "in_use"), "the closed manager gave every block back")
	require.Equal(t, value("locus_kv_events_batches_total", "publisher", "kv"), value("locus_kv_events_published_batches_total"))
	require.Positive(t, value("locus_kv_events_published_events_total"))
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(strings.NewReader(string(body)))
}

func TestMetricsLoopbackOnly(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "192.0.2.1:9090", "example.com:9090"} {
		_, _, err := serveMetrics(addr, false, prometheus.NewRegistry())
		require.ErrorIs(t, err, errNotLoopback, addr)
	}
	_, _, err := serveMetrics("127.0.0.1", false, prometheus.NewRegistry())
	require.Error(t, err, "no port")
}
