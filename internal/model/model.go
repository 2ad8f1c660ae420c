// Package model holds obviously correct reference models of the allocator
// contracts (pool, classes, pages) and the op-sequence decoders that drive
// them. The conformance suites and the fuzz targets of pool, classes and
// pages use the same models and decoders: a suite decodes its ops from a
// seeded *rand.Rand, a fuzz target from its input bytes (Bytes).
//
// The models sit below the engine: they import nothing from it and speak in
// plain ints (slots, pages, classes, content types). The handle a model
// keeps for a live block or run is the caller's key type K, which the model
// only compares.
package model

// Source is where a decoder takes its choices from: a *rand.Rand from
// math/rand/v2, or Bytes.
type Source interface {
	IntN(n int) int
}

// Bytes is a Source over fuzz input: IntN(n) takes one byte, or two when n
// is above 256, modulo n; past the end of the input it returns 0.
type Bytes struct {
	data []byte
	pos  int
}

// NewBytes returns a Source over data.
func NewBytes(data []byte) *Bytes { return &Bytes{data: data} }

// IntN returns a choice in [0, n).
func (b *Bytes) IntN(n int) int {
	if n <= 0 {
		panic("model: IntN of a non-positive n")
	}
	v := b.next()
	if n > 256 {
		v = v<<8 | b.next()
	}
	return v % n
}

func (b *Bytes) next() int {
	if b.pos >= len(b.data) {
		return 0
	}
	b.pos++
	return int(b.data[b.pos-1])
}

// Done reports whether every byte has been taken.
func (b *Bytes) Done() bool { return b.pos >= len(b.data) }

// Perm returns a permutation of [0, n) drawn from src exactly as
// (*rand.Rand).Perm draws it, so that a decoder over a *rand.Rand makes the
// choices a suite made before it used the decoder.
func Perm(src Source, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := src.IntN(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// keep appends k to a list of stale keys that holds at most StaleKeep.
func keep[K any](list []K, k K) []K {
	if len(list) == StaleKeep {
		list = list[1:]
	}
	return append(list, k)
}

// StaleKeep is how many freed keys a model remembers.
const StaleKeep = 256
