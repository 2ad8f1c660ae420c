package fifo_test

import (
	"testing"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/pool"
)

func TestConformance(t *testing.T) {
	conformance.TestPolicy(t, func(t *testing.T) pool.ReusePolicy { return fifo.Policy{} })
}
