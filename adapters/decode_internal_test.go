package adapters

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pages"
)

// adversarialScales are float32 scales at and around every boundary of
// the fast path and of the formats: zeros, subnormals, the smallest
// normals, the largest finite over 128, infinities, NaNs, negatives, and
// scales that put products on halfway points of the 16-bit grids.
func adversarialScales() []uint32 {
	var out []uint32
	add := func(f float64) {
		b := math.Float32bits(float32(f))
		out = append(out, b, b+1, b-1, b|1<<31)
	}
	for _, f := range []Format{FP16, BF16} {
		man, bias := f.bits()
		add(math.Ldexp(1, 1-bias))                              // smallest normal
		add(math.Ldexp(2-math.Ldexp(1, -int(man)), bias) / 128) // the fast path's top
		add(math.Ldexp(2-math.Ldexp(1, -int(man)), bias) / 127) // 127·s at the largest finite
		add(math.Ldexp(1, bias+1) / 127)                        // 127·s at infinity
		add(math.Ldexp(1, -int(man)-bias))                      // half the smallest subnormal
		for k := 1; k < 64; k += 2 {
			add(math.Ldexp(float64(k), -int(man)-1)) // q·s = k/2 ulp of 1: ties
			add(math.Ldexp(1+float64(k)*math.Ldexp(1, -int(man)-1), -3))
		}
	}
	out = append(out, 0, 1<<31, 1, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff)
	return out
}

// TestDecodeFastEqualsReference checks the fast decoder against the
// reference bit for bit: every q for every adversarial scale, and random
// encodings (random scale bits included) of random lengths and groups.
func TestDecodeFastEqualsReference(t *testing.T) {
	for _, f := range []Format{FP16, BF16} {
		scales := adversarialScales()
		q := Quant{Format: f, Group: 256}
		n := 2 * 256 * len(scales)
		enc := make([]byte, q.EncodedSize(n))
		for g, s := range scales {
			binary.LittleEndian.PutUint32(enc[4*g:], s)
			for i := range 256 {
				enc[4*len(scales)+256*g+i] = byte(i)
			}
		}
		got, want := make([]byte, n), make([]byte, n)
		if err := q.Decode(got, enc); err != nil {
			t.Fatal(err)
		}
		q.decodeRef(want, enc)
		compare(t, f.String()+" adversarial", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for it := range 400 {
		f := []Format{FP16, BF16}[it%2]
		q := Quant{Format: f, Group: 1 + rng.IntN(200)}
		n := 2 * (1 + rng.IntN(3000))
		enc := make([]byte, q.EncodedSize(n))
		for i := range enc {
			enc[i] = byte(rng.Uint32())
		}
		groups := q.groups(n)
		for g := range groups {
			var s uint32
			switch rng.IntN(3) {
			case 0:
				s = rng.Uint32() // any bits: NaNs, infinities, negatives, subnormals
			default: // a plausible scale, anywhere in the float32 range
				s = math.Float32bits(float32(math.Ldexp(1+rng.Float64(), rng.IntN(280)-150)))
			}
			binary.LittleEndian.PutUint32(enc[4*g:], s)
		}
		got, want := make([]byte, n), make([]byte, n)
		if err := q.Decode(got, enc); err != nil {
			t.Fatal(err)
		}
		q.decodeRef(want, enc)
		compare(t, q.Format.String(), got, want)
	}
}

func compare(t *testing.T, name string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	for i := 0; i < len(got); i += 2 {
		if got[i] != want[i] || got[i+1] != want[i+1] {
			t.Fatalf("%s: element %d: fast %#04x, reference %#04x", name, i/2,
				binary.LittleEndian.Uint16(got[i:]), binary.LittleEndian.Uint16(want[i:]))
		}
	}
}

// TestParallelDecode checks the owner's split decode against the
// reference, with idle workers, with every worker busy (requests taken
// back) and with more workers than chunks.
func TestParallelDecode(t *testing.T) {
	b, err := heap.New(64*4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	hot, err := pages.New(b, 4096)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, workers := range []int{1, 3} {
		q := Quant{Format: BF16, Group: 64}
		m, err := New(hot, pages.DefaultContent, WithQuantization(q, 0), WithWorkers(workers, 4))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2 * decodeChunk, 5*decodeChunk + 130} {
			w := make([]byte, n)
			for i := 0; i < n; i += 2 {
				binary.LittleEndian.PutUint16(w[i:], BF16.Encode16(rng.NormFloat64()*math.Ldexp(1, rng.IntN(20)-10)))
			}
			enc := make([]byte, q.EncodedSize(n))
			if err := q.Encode(enc, w); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, n)
			q.decodeRef(want, enc)
			for range 3 {
				got := make([]byte, n)
				if err := m.decode(got, enc); err != nil {
					t.Fatal(err)
				}
				compare(t, "parallel", got, want)
			}
		}
		// Every request taken back by the owner: a Manager with no worker
		// reading parts.
		idle := &Manager{cfg: m.cfg, parts: make(chan *decodeJob, workers)}
		got := make([]byte, 3*decodeChunk)
		enc := make([]byte, q.EncodedSize(len(got)))
		if err := idle.decode(got, enc); err != nil || !bytes.Equal(got, make([]byte, len(got))) || len(idle.parts) != 0 {
			t.Fatalf("decode with no helper: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
