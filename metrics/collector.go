package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/internal/typednil"
)

// namespace prefixes every metric name.
const namespace = "locus"

// A family is one metric family of a kind of source: its name, help and
// variable labels, and how a snapshot of the source gives its samples. A
// kind of source (pool, kv manager, publisher, ...) is a list of families;
// collecting a source is writing each family from one snapshot.
type family[S any] struct {
	name, help string
	labels     []string // variable labels
	write      func(w *writer, s S)
}

// collector collects one source: it takes one snapshot per scrape and
// writes every family from it, so that the samples of one scrape agree
// with each other.
type collector[S any] struct {
	snapshot func() S
	families []family[S]
	descs    []*prometheus.Desc
}

// newCollector returns a collector of the families of one source, whose
// metrics carry the constant label key=value. A nil source makes a
// collector whose registration fails.
func newCollector[S any](subsystem, key, value string, src interface{ Snapshot() S }, families []family[S]) prometheus.Collector {
	c := &collector[S]{families: families}
	if typednil.Is(src) {
		c.descs = []*prometheus.Desc{prometheus.NewInvalidDesc(fmt.Errorf("locus/metrics: %s %q: nil source", subsystem, value))}
		return c
	}
	c.snapshot = src.Snapshot
	constLabels := prometheus.Labels{key: value}
	for _, f := range families {
		name := prometheus.BuildFQName(namespace, subsystem, f.name)
		c.descs = append(c.descs, prometheus.NewDesc(name, f.help, f.labels, constLabels))
	}
	return c
}

// Describe sends the descriptions of every family.
func (c *collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect takes one snapshot and sends every family's samples.
func (c *collector[S]) Collect(ch chan<- prometheus.Metric) {
	if c.snapshot == nil {
		return
	}
	s := c.snapshot()
	for i, f := range c.families {
		f.write(&writer{ch: ch, desc: c.descs[i]}, s)
	}
}

// each adapts the families of a T to a source S made of several T, told
// apart by one more variable label, which comes first: the per-class
// families of a size-class allocator are the pool families with a class
// label. items calls yield with every T of a snapshot and its label value.
func each[S, T any](label string, fs []family[T], items func(s S, yield func(value string, t T))) []family[S] {
	out := make([]family[S], len(fs))
	for i, f := range fs {
		out[i] = family[S]{f.name, f.help, append([]string{label}, f.labels...), func(w *writer, s S) {
			items(s, func(v string, t T) { f.write(w.with(v), t) })
		}}
	}
	return out
}

// writer sends the samples of one family. A sample it cannot build (label
// values that do not fit the family) is sent as an invalid metric, which
// fails the scrape with its error instead of panicking.
type writer struct {
	ch     chan<- prometheus.Metric
	desc   *prometheus.Desc
	prefix []string // label values that precede every sample's own
}

// with returns a writer whose samples' label values start with v.
func (w *writer) with(v string) *writer {
	return &writer{ch: w.ch, desc: w.desc, prefix: append(w.prefix[:len(w.prefix):len(w.prefix)], v)}
}

// labels returns the label values of a sample.
func (w *writer) labels(own []string) []string {
	if len(w.prefix) == 0 {
		return own
	}
	return append(w.prefix[:len(w.prefix):len(w.prefix)], own...)
}

func (w *writer) send(m prometheus.Metric, err error) {
	if err != nil {
		m = prometheus.NewInvalidMetric(w.desc, err)
	}
	w.ch <- m
}

func (w *writer) counter(v uint64, labels ...string) {
	w.send(prometheus.NewConstMetric(w.desc, prometheus.CounterValue, float64(v), w.labels(labels)...))
}

func (w *writer) gauge(v float64, labels ...string) {
	w.send(prometheus.NewConstMetric(w.desc, prometheus.GaugeValue, v, w.labels(labels)...))
}

// histogram sends a histogram from per-bucket (not cumulative) counts:
// counts[k] counts the observations at most bounds[k] and above the bound
// before it; observations above the last bound count only in count.
func (w *writer) histogram(bounds []float64, counts []uint64, count uint64, sum float64, labels ...string) {
	buckets := make(map[float64]uint64, len(bounds))
	cum := uint64(0)
	for k, b := range bounds {
		cum += counts[k]
		buckets[b] = cum
	}
	w.send(prometheus.NewConstHistogram(w.desc, count, sum, buckets, w.labels(labels)...))
}
