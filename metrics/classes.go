package metrics

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

// ClassesSource is what NewClasses reads: every *classes.Pool[B, T, P] is
// one.
type ClassesSource interface {
	Snapshot() classes.Stats
}

// NewClasses returns a collector of a size-class allocator's accounting,
// labelled pool=name, with a class label (the class's block size in bytes)
// on each class's metrics. Every scrape reads c.Snapshot once (published at
// the owner's Drain and Stats). A nil c makes a collector whose
// registration fails.
//
// Each class has the metrics of NewPool under the subsystem classes
// (locus_classes_blocks{class, state}, locus_classes_allocated_blocks_total{class},
// the drain histogram, ...), and:
//
//	locus_classes_requested_bytes_total{class}   counter: bytes the allocations asked for
//	locus_classes_handed_out_bytes_total{class}  counter: bytes handed out, whole blocks
//	locus_classes_unknown_class_handles_total    counter: handles refused for naming no class
//
// The internal fragmentation over a window is
// 1 - rate(requested_bytes_total) / rate(handed_out_bytes_total).
func NewClasses(name string, c ClassesSource) prometheus.Collector {
	return newCollector[classes.Stats]("classes", "pool", name, c, classFamilies)
}

// perClass calls yield with every class of a snapshot and its label.
func perClass[T any](part func(classes.ClassStats) T) func(classes.Stats, func(string, T)) {
	return func(s classes.Stats, yield func(string, T)) {
		for _, c := range s.Classes {
			yield(strconv.Itoa(c.BlockSize), part(c))
		}
	}
}

var classFamilies = slices.Concat(
	each("class", poolFamilies, perClass(func(c classes.ClassStats) pool.Stats { return c.Stats })),
	each("class", []family[classes.ClassStats]{
		{"requested_bytes_total", "Bytes the allocations of a class asked for.", nil,
			func(w *writer, c classes.ClassStats) { w.counter(c.Requested) }},
		{"handed_out_bytes_total", "Bytes a class handed out: its allocations times its block size.", nil,
			func(w *writer, c classes.ClassStats) { w.counter(c.HandedOut()) }},
	}, perClass(func(c classes.ClassStats) classes.ClassStats { return c })),
	[]family[classes.Stats]{
		{"unknown_class_handles_total", "Handles refused because they name no class of the allocator.", nil,
			func(w *writer, s classes.Stats) { w.counter(s.Rejected) }},
	},
)
