package metrics

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/internal/typednil"
)

// NewVLLM returns a collector of a kv manager's accounting under the names
// vLLM's engine exports, labelled model_name=model and engine="0", for
// dashboards and routers that already read a vLLM engine's /metrics
// (llm-d's scorers read vllm:kv_cache_usage_perc and cache_config_info).
// Register it beside NewManager, which says more under locus's own names;
// do not register two of them for one model. Every scrape reads
// m.Snapshot once. A nil m makes a collector whose registration fails.
//
// Its metrics, as vLLM's v1 engine defines them:
//
//	vllm:kv_cache_usage_perc          gauge: blocks held by sequences over the capacity (cached, evictable blocks count as free, as in vLLM)
//	vllm:prefix_cache_queries_total   counter: prompt tokens admissions looked up
//	vllm:prefix_cache_hits_total      counter: of those, found cached
//	vllm:num_preemptions_total        counter: sequences preempted
//	vllm:cache_config_info{block_size, num_gpu_blocks}  gauge, always 1
func NewVLLM(model string, m ManagerSource) prometheus.Collector {
	c := &vllmCollector{m: m, model: model}
	labels := prometheus.Labels{"model_name": model, "engine": "0"}
	c.usage = prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", nil, labels)
	c.queries = prometheus.NewDesc("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", nil, labels)
	c.hits = prometheus.NewDesc("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", nil, labels)
	c.preemptions = prometheus.NewDesc("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", nil, labels)
	c.config = prometheus.NewDesc("vllm:cache_config_info", "Information of the KV cache configuration.", []string{"block_size", "num_gpu_blocks"}, labels)
	return c
}

type vllmCollector struct {
	m                                         ManagerSource
	model                                     string
	usage, queries, hits, preemptions, config *prometheus.Desc
}

// Describe sends the descriptions; with no source, an invalid one, so that
// registration fails rather than scrapes.
func (c *vllmCollector) Describe(ch chan<- *prometheus.Desc) {
	if typednil.Is(c.m) {
		ch <- prometheus.NewInvalidDesc(fmt.Errorf("locus/metrics: vllm %q: nil source", c.model))
		return
	}
	for _, d := range []*prometheus.Desc{c.usage, c.queries, c.hits, c.preemptions, c.config} {
		ch <- d
	}
}

// Collect reads one snapshot and sends every metric.
func (c *vllmCollector) Collect(ch chan<- prometheus.Metric) {
	if typednil.Is(c.m) {
		return
	}
	s := c.m.Snapshot()
	usage := 0.0
	if s.Capacity > 0 {
		usage = float64(s.InUse) / float64(s.Capacity)
	}
	ch <- prometheus.MustNewConstMetric(c.usage, prometheus.GaugeValue, usage)
	ch <- prometheus.MustNewConstMetric(c.queries, prometheus.CounterValue, float64(s.QueryTokens))
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.HitTokens))
	ch <- prometheus.MustNewConstMetric(c.preemptions, prometheus.CounterValue, float64(s.Preemptions))
	ch <- prometheus.MustNewConstMetric(c.config, prometheus.GaugeValue, 1,
		strconv.Itoa(s.TokensPerBlock), strconv.Itoa(s.Capacity))
}
