package adapters_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/locus-go/locus/adapters"
)

// tensor encodes xs in format f.
func tensor(f adapters.Format, xs []float64) []byte {
	b := make([]byte, 2*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint16(b[2*i:], f.Encode16(x))
	}
	return b
}

// encodeDecode encodes w with q and decodes the encoding: it returns the
// encoding and the weights it decodes to.
func encodeDecode(t testing.TB, q adapters.Quant, w []byte) (enc, out []byte) {
	t.Helper()
	enc = make([]byte, q.EncodedSize(len(w)))
	if err := q.Encode(enc, w); err != nil {
		t.Fatal(err)
	}
	out = make([]byte, len(w))
	if err := q.Decode(out, enc); err != nil {
		t.Fatal(err)
	}
	return enc, out
}

// TestQuantBound checks the documented error bound element by element,
// and the RMS relative error, on random and adversarial tensors.
func TestQuantBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gauss := func(n int, sigma float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = rng.NormFloat64() * sigma
		}
		return xs
	}
	tests := []struct {
		name   string
		xs     func(f adapters.Format) []float64
		group  int
		maxRMS float64 // relative RMS error bound; 0: not checked
	}{
		{"gaussian g64", func(adapters.Format) []float64 { return gauss(4096, 0.02) }, 64, 0.01},
		{"gaussian row 1024", func(adapters.Format) []float64 { return gauss(4096, 1) }, 1024, 0.015},
		{"zeros", func(adapters.Format) []float64 { return make([]float64, 300) }, 64, 0},
		{"one zero channel", func(adapters.Format) []float64 {
			xs := gauss(256, 1)
			clear(xs[64:128])
			return xs
		}, 64, 0.01},
		{"subnormals", func(f adapters.Format) []float64 {
			xs := make([]float64, 200)
			for i := range xs {
				xs[i] = f.Decode16(uint16(i % 40)) // the smallest subnormals
			}
			return xs
		}, 32, 0},
		{"extremes", func(f adapters.Format) []float64 {
			top := f.Decode16(0x7bff) // fp16 max
			if f == adapters.BF16 {
				top = f.Decode16(0x7f7f)
			}
			return []float64{top, -top, top / 3, 1e-3, 0, math.Copysign(0, -1), top}
		}, 4, 0},
		{"outlier", func(adapters.Format) []float64 { xs := gauss(128, 0.01); xs[7] = 60; return xs }, 128, 0},
		{"ragged tail", func(adapters.Format) []float64 { return gauss(1000, 1) }, 64, 0.01},
	}
	for _, f := range []adapters.Format{adapters.FP16, adapters.BF16} {
		for _, tt := range tests {
			t.Run(f.String()+"/"+tt.name, func(t *testing.T) {
				q := adapters.Quant{Format: f, Group: tt.group}
				src := tensor(f, tt.xs(f))
				enc, dst := encodeDecode(t, q, src)
				var se, sx float64
				for i := range len(src) / 2 {
					x := f.Decode16(binary.LittleEndian.Uint16(src[2*i:]))
					y := f.Decode16(binary.LittleEndian.Uint16(dst[2*i:]))
					s := q.Scale(enc, len(src), i/tt.group)
					if d := math.Abs(x - y); d > q.Bound(x, s) {
						t.Fatalf("element %d: %g decoded as %g, error %g > bound %g", i, x, y, d, q.Bound(x, s))
					}
					if x == 0 && y != 0 && s == 0 {
						t.Fatalf("zero group decoded to %g", y)
					}
					se += (x - y) * (x - y)
					sx += x * x
				}
				if tt.maxRMS > 0 {
					if rel := math.Sqrt(se / sx); rel > tt.maxRMS {
						t.Fatalf("relative RMS error %.4f > %.4f", rel, tt.maxRMS)
					}
				}
				if r := float64(len(enc)) / float64(len(src)); tt.group >= 64 && r > 0.55 {
					t.Fatalf("encoding is %.2f of the original", r)
				}
			})
		}
	}
}

func TestQuantRejects(t *testing.T) {
	q := adapters.Quant{Format: adapters.FP16, Group: 4}
	for _, x := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		src := tensor(adapters.FP16, []float64{1, 2, x, 3})
		if err := q.Encode(make([]byte, q.EncodedSize(len(src))), src); !errors.Is(err, adapters.ErrNotFinite) {
			t.Fatalf("%g: %v", x, err)
		}
	}
	if q.EncodedSize(3) != -1 || (adapters.Quant{}).EncodedSize(4) != -1 {
		t.Fatal("EncodedSize accepts an odd size or an invalid Quant")
	}
	if err := q.Encode(make([]byte, 3), make([]byte, 8)); err == nil {
		t.Fatal("Encode accepted a wrong size")
	}
	if err := q.Decode(make([]byte, 8), make([]byte, 3)); err == nil {
		t.Fatal("Decode accepted a wrong size")
	}
}

// TestFormatRoundTrip: every finite 16-bit value converts to float64 and
// back unchanged.
func TestFormatRoundTrip(t *testing.T) {
	for _, f := range []adapters.Format{adapters.FP16, adapters.BF16} {
		for b := range 1 << 16 {
			x := f.Decode16(uint16(b))
			if math.IsNaN(x) {
				continue
			}
			if got := f.Encode16(x); got != uint16(b) {
				t.Fatalf("%v: %#04x -> %g -> %#04x", f, b, x, got)
			}
		}
	}
}

// TestQuantizedWarmTier: an adapter demoted to a quantized warm tier comes
// back within the bound, from half the bytes; one with a NaN stays exact.
func TestQuantizedWarmTier(t *testing.T) {
	q := adapters.Quant{Format: adapters.FP16, Group: 64}
	rng := rand.New(rand.NewPCG(3, 4))
	xs := make([]float64, 8192)
	for i := range xs {
		xs[i] = rng.NormFloat64() * 0.05
	}
	w := tensor(adapters.FP16, xs)
	nan := tensor(adapters.FP16, append([]float64{math.NaN()}, xs[1:]...))
	f := newFixture(t, 64, adapters.WithWarm(1<<20, 0, pageSize), adapters.WithQuantization(q, 0), adapters.WithHotBudget(1, 0))
	for id, b := range map[string][]byte{"w": w, "nan": nan} {
		l, _ := adapters.Func(int64(len(b)), func(dst []byte) (int, error) { return copy(dst, b), nil })
		if err := f.m.Register(id, l); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := f.m.Acquire("w")
	_ = f.m.Release(h)
	h, _ = f.m.Acquire("nan") // demotes w into the warm tier, as int8
	_ = f.m.Release(h)
	s := f.m.Stats()
	if s.Quantized != 1 || s.Warm.Bytes != int64(q.EncodedSize(len(w))) {
		t.Fatalf("stats %+v", s)
	}
	h, err := f.m.Acquire("w") // demotes nan: refused, kept exact
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.m.Bytes(h)
	for i := range xs {
		x := adapters.FP16.Decode16(binary.LittleEndian.Uint16(w[2*i:]))
		y := adapters.FP16.Decode16(binary.LittleEndian.Uint16(got[2*i:]))
		if math.Abs(x-y) > q.Bound(x, 1.0/127) { // the group's absmax is below 1
			t.Fatalf("element %d: %g vs %g", i, x, y)
		}
	}
	_ = f.m.Release(h)
	if s := f.m.Stats(); s.QuantRefused != 1 || s.Warm.Adapters != 2 {
		t.Fatalf("stats %+v", s)
	}
	h, _ = f.m.Acquire("nan")
	got, _ = f.m.Bytes(h)
	if string(got) != string(nan) {
		t.Fatal("the exact warm copy of nan differs")
	}
	_ = f.m.Release(h)
	f.check(t)
}

// TestCompressAfterIdle: warm copies stay exact until the adapter has been
// idle past the threshold; Tick then halves them.
func TestCompressAfterIdle(t *testing.T) {
	q := adapters.Quant{Format: adapters.BF16, Group: 128}
	const size = 8 * pageSize
	f := newFixture(t, 64, adapters.WithWarm(1<<20, 0, pageSize), adapters.WithQuantization(q, 5*time.Minute),
		adapters.WithPromotion(10, time.Minute, time.Minute))
	xs := make([]float64, size/2)
	for i := range xs {
		xs[i] = float64(i%255-127) / 1000
	}
	w := tensor(adapters.BF16, xs)
	l, _ := adapters.Func(size, func(dst []byte) (int, error) { return copy(dst, w), nil })
	if err := f.m.Register("a", l); err != nil {
		t.Fatal(err)
	}
	h, _ := f.m.Acquire("a")
	_ = f.m.Release(h)
	f.clk.advance(2 * time.Minute)
	if err := f.m.Tick(); err != nil { // idle past a minute: demoted, exact
		t.Fatal(err)
	}
	if s := f.m.Stats(); s.Warm.Bytes != size || s.Quantized != 0 {
		t.Fatalf("stats %+v", s)
	}
	f.clk.advance(5 * time.Minute)
	if err := f.m.Tick(); err != nil {
		t.Fatal(err)
	}
	s := f.m.Stats()
	if s.Quantized != 1 || s.Warm.Bytes != int64(q.EncodedSize(size)) || s.Compressions != 1 {
		t.Fatalf("stats %+v", s)
	}
	h, err := f.m.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	if s := f.m.Stats(); s.WarmLoads != 1 {
		t.Fatalf("stats %+v", s)
	}
	_ = f.m.Release(h)
	f.check(t)
}
