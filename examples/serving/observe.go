package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/metrics"
)

// observer wires the serving loop into a fleet: Prometheus metrics of the
// pool and the manager, and the manager's cache events for KV-aware
// routers. The zero observer does neither.
type observer struct {
	reg    prometheus.Registerer // nil: no metrics
	events string                // ZMQ endpoint of the KV events; "": none
	topic  string
	// subscribers is how many event subscribers to wait for, at most
	// wait, before the first step: batches published before a subscriber
	// connects are lost to it (ZMQ's slow joiner).
	subscribers int
	wait        time.Duration

	pub *events.Publisher
}

// register registers a collector, if metrics are on.
func (o *observer) register(c prometheus.Collector) error {
	if o.reg == nil {
		return nil
	}
	return o.reg.Register(c)
}

// managerOptions starts the event publisher, if asked, and returns the
// manager options that feed it.
func (o *observer) managerOptions() ([]kv.Option, error) {
	if o.events == "" {
		return nil, nil
	}
	pub, err := events.New(o.events, events.WithTopic(o.topic))
	if err != nil {
		return nil, err
	}
	o.pub = pub
	if err := o.register(metrics.NewPublisher("kv", pub)); err != nil {
		return nil, errors.Join(err, pub.Close())
	}
	if o.subscribers > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), o.wait)
		defer cancel()
		if err := pub.WaitSubscribers(ctx, o.subscribers); err != nil {
			return nil, errors.Join(fmt.Errorf("waiting for %d event subscribers: %w", o.subscribers, err), pub.Close())
		}
	}
	return []kv.Option{kv.WithSubscriber(pub.Subscriber())}, nil
}

// step ends a scheduling step: the step's cache events go out as one batch.
func (o *observer) step() {
	if o.pub != nil {
		o.pub.Flush()
	}
}

// close closes the publisher and reports what it published.
func (o *observer) close(out io.Writer) error {
	if o.pub == nil {
		return nil
	}
	where := o.events
	if a := o.pub.Addr(); a != nil {
		where = "tcp://" + a.String()
	}
	err := o.pub.Close()
	st := o.pub.Snapshot()
	fmt.Fprintf(out, "kv events: %d batches of %d events published on %s, %d batches dropped, %d before any subscriber\n",
		st.Published, st.PublishedEvents, where, st.Dropped+st.Failed, st.Unheard)
	return err
}

// errNotLoopback refuses to serve metrics beyond this machine unless asked.
var errNotLoopback = errors.New("not a loopback address (pass -metrics-public to serve metrics on it)")

// serveMetrics serves the registry's metrics at /metrics on addr, which
// must be a loopback address unless public is set, and returns the server
// and the address it listens on (the port chosen for ":0").
func serveMetrics(addr string, public bool, g prometheus.Gatherer) (*http.Server, net.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	if ip := net.ParseIP(host); !public && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, nil, fmt.Errorf("-metrics %s: %w", addr, errNotLoopback)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, l.Addr(), nil
}
