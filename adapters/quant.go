package adapters

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Format is the element format of an adapter's weights, as the warm tier's
// quantizer reads them: little-endian 16-bit floats.
type Format uint8

// The formats the quantizer reads and writes.
const (
	// FP16 is IEEE 754 binary16 (5 exponent bits, 10 mantissa bits).
	FP16 Format = iota + 1
	// BF16 is bfloat16 (8 exponent bits, 7 mantissa bits).
	BF16
)

// String returns "fp16" or "bf16".
func (f Format) String() string {
	switch f {
	case FP16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Quant describes the int8 encoding of the warm tier: the weights, read
// as 16-bit floats of Format, are cut into groups of Group consecutive
// elements (a group per output channel when Group is the row length, or a
// finer group), and each group is stored as one float32 absmax scale
// s = max|x|/127 (rounded up to a float32) followed by one int8 per
// element, q = round(x/s). Decoding writes q·s back in Format.
//
// The encoding of E elements takes 4·ceil(E/Group) + E bytes against 2·E
// for the 16-bit original: 0.53× for Group 64, 0.51× for Group 128. So a
// promotion from a quantized warm copy moves about half the bytes.
//
// # Error bound
//
// For every element x of a group with stored scale s, the decoded x' obeys
//
//	|x - x'| <= s/2 + u·(|x| + s/2) + t
//
// where s <= max|x|/127·(1+2^-23) + 2^-149 is the group's scale, u the
// format's unit roundoff (2^-11 for FP16, 2^-8 for BF16) and t half its
// smallest subnormal (2^-25 for FP16, 2^-134 for BF16): rounding to the
// int8 grid costs at most half a step, writing q·s back as a 16-bit float
// at most half an ulp. A group of zeros decodes to zeros exactly. The
// relative RMS error on Gaussian weights is about 0.6 % for Group 64
// (measured in the tests). Infinities and NaNs are refused with
// ErrNotFinite: they have no absmax scale.
//
// Use it for adapters whose serving tolerates int8 weights; leave the warm
// tier exact (the default) when a model must see the original bits.
type Quant struct {
	Format Format
	// Group is the number of elements sharing one scale: the row length
	// for per-output-channel scales, or a divisor of it (64, 128) for
	// per-group scales. It must be positive.
	Group int
}

func (q Quant) valid() bool {
	return (q.Format == FP16 || q.Format == BF16) && q.Group > 0 && q.Group <= 1<<24
}

// EncodedSize returns the size of the encoding of n bytes of weights, or
// -1 if n is not a whole number of 16-bit elements or q is invalid.
func (q Quant) EncodedSize(n int) int {
	if !q.valid() || n <= 0 || n%2 != 0 {
		return -1
	}
	e := n / 2
	return 4*((e+q.Group-1)/q.Group) + e
}

// Encode writes the int8 encoding of src into dst, which must be
// EncodedSize(len(src)) bytes. It fails with ErrNotFinite on an infinity
// or NaN (dst is then partly written) and with an error wrapping
// pool.ErrInvalidArgument on sizes that do not match.
func (q Quant) Encode(dst, src []byte) error {
	if sz := q.EncodedSize(len(src)); sz < 0 || len(dst) != sz {
		return fmt.Errorf("%w: adapters: cannot encode %d bytes into %d", errArg, len(src), len(dst))
	}
	e := len(src) / 2
	groups := (e + q.Group - 1) / q.Group
	qs := dst[4*groups:]
	for g := range groups {
		lo, hi := g*q.Group, min((g+1)*q.Group, e)
		absmax := 0.0
		for i := lo; i < hi; i++ {
			x := q.Format.decode(binary.LittleEndian.Uint16(src[2*i:]))
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: element %d", ErrNotFinite, i)
			}
			absmax = max(absmax, math.Abs(x))
		}
		s := float32(absmax / 127)
		if float64(s)*127 < absmax {
			s = math.Nextafter32(s, float32(math.Inf(1)))
		}
		binary.LittleEndian.PutUint32(dst[4*g:], math.Float32bits(s))
		for i := lo; i < hi; i++ {
			var v int8
			if s != 0 {
				x := q.Format.decode(binary.LittleEndian.Uint16(src[2*i:]))
				v = int8(max(-127, min(127, math.RoundToEven(x/float64(s)))))
			}
			qs[i] = byte(v)
		}
	}
	return nil
}

// Decode writes the weights encoded in src (by Encode) into dst, len(dst)
// bytes of Format. It fails with an error wrapping
// pool.ErrInvalidArgument if the sizes do not match.
func (q Quant) Decode(dst, src []byte) error {
	if sz := q.EncodedSize(len(dst)); sz < 0 || len(src) != sz {
		return fmt.Errorf("%w: adapters: cannot decode %d bytes into %d", errArg, len(src), len(dst))
	}
	q.decodeGroups(dst, src, 0, q.groups(len(dst)))
	return nil
}

// groups returns the number of groups of an encoding of n bytes of
// weights (n valid for EncodedSize).
func (q Quant) groups(n int) int { return (n/2 + q.Group - 1) / q.Group }

// decodeRef is the reference decoder, one element at a time through
// Format.encode: Decode must equal it bit for bit (the tests check).
func (q Quant) decodeRef(dst, src []byte) {
	e := len(dst) / 2
	groups := (e + q.Group - 1) / q.Group
	qs := src[4*groups:]
	for g := range groups {
		s := float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*g:])))
		lo, hi := g*q.Group, min((g+1)*q.Group, e)
		for i := lo; i < hi; i++ {
			binary.LittleEndian.PutUint16(dst[2*i:], q.Format.encode(float64(int8(qs[i]))*s))
		}
	}
}

// decodeGroups decodes groups [g0, g1) of the encoding src into dst, the
// whole weights (sizes checked by the caller): disjoint group ranges
// write disjoint bytes of dst, so workers can decode them in parallel.
//
// The fast path is exact, not an approximation. The product q·s of an
// int8 and a float32 has at most 31 significant bits, so it is exact as
// a float64, and the reference rounds it once with Format.encode. For a
// group whose scale s is at least the format's smallest normal and at
// most its largest finite over 128, every nonzero product is normal and
// finite, so only encode's first branch applies, and decodeFP16 and
// decodeBF16 run that branch without branches. Other scales (huge ones
// that may overflow, zero, subnormal results, and the infinities, NaNs
// or negative scales of a hostile encoding) take the reference, element
// by element.
func (q Quant) decodeGroups(dst, src []byte, g0, g1 int) {
	e := len(dst) / 2
	qs := src[4*q.groups(len(dst)):]
	man, bias := q.Format.bits()
	minNormal := math.Ldexp(1, 1-bias)
	maxFast := math.Ldexp(2-math.Ldexp(1, -int(man)), bias) / 128 // the largest finite over 128
	for g := g0; g < g1; g++ {
		bits := binary.LittleEndian.Uint32(src[4*g:])
		s := float64(math.Float32frombits(bits))
		lo, hi := g*q.Group, min((g+1)*q.Group, e)
		d, v := dst[2*lo:2*hi], qs[lo:hi]
		switch {
		case s >= minNormal && s <= maxFast && q.Format == FP16:
			decodeFP16(d, v, s)
		case s >= minNormal && s <= maxFast:
			decodeBF16(d, v, s)
		case bits == 0: // +0: a group of zeros; q·(+0) is ±0 by q's sign
			d = d[:2*len(v)]
			for i, b := range v {
				binary.LittleEndian.PutUint16(d[2*i:], uint16(b&0x80)<<8)
			}
		default:
			for i, b := range v {
				binary.LittleEndian.PutUint16(d[2*i:], q.Format.encode(float64(int8(b))*s))
			}
		}
	}
}

// decodeFP16 and decodeBF16 write round(q·s) for every q of v into d,
// as encode's normal branch does, for a scale s in [smallest normal,
// largest finite/128] (see decodeGroups): |q·s| is then 0 or normal and
// finite, computed from |q| (int8abs) with q's sign set apart. The bits
// of |q·s| are raised to the re-bias constant, where only q = 0 lands and
// rounds to +0 (every nonzero product is above it): a conditional move,
// no branch. Eight elements are read and written per step.
func decodeFP16(d, v []byte, s float64) {
	d = d[:2*len(v)]
	for len(v) >= 8 && len(d) >= 16 {
		w := binary.LittleEndian.Uint64(v)
		binary.LittleEndian.PutUint64(d, uint64(fp16Of(byte(w), s))|uint64(fp16Of(byte(w>>8), s))<<16|
			uint64(fp16Of(byte(w>>16), s))<<32|uint64(fp16Of(byte(w>>24), s))<<48)
		binary.LittleEndian.PutUint64(d[8:], uint64(fp16Of(byte(w>>32), s))|uint64(fp16Of(byte(w>>40), s))<<16|
			uint64(fp16Of(byte(w>>48), s))<<32|uint64(fp16Of(byte(w>>56), s))<<48)
		v, d = v[8:], d[16:]
	}
	for i, b := range v {
		binary.LittleEndian.PutUint16(d[2*i:], fp16Of(b, s))
	}
}

// fp16Of is one element of decodeFP16: encode's normal branch, with the
// re-bias and the rounding increment folded into one constant.
func fp16Of(b byte, s float64) uint16 {
	const (
		sh     = 52 - 10
		rebias = (1023 - 15) << 52
		inc    = 1<<64 + 1<<(sh-1) - 1 - rebias // wraps: adds half an ulp less one, subtracts rebias
	)
	x := max(math.Float64bits(int8abs[b]*s), uint64(rebias))
	return uint16(b&0x80)<<8 | uint16((x+inc+(x>>sh)&1)>>sh)
}

// decodeBF16 is decodeFP16 for BF16.
func decodeBF16(d, v []byte, s float64) {
	d = d[:2*len(v)]
	for len(v) >= 8 && len(d) >= 16 {
		w := binary.LittleEndian.Uint64(v)
		binary.LittleEndian.PutUint64(d, uint64(bf16Of(byte(w), s))|uint64(bf16Of(byte(w>>8), s))<<16|
			uint64(bf16Of(byte(w>>16), s))<<32|uint64(bf16Of(byte(w>>24), s))<<48)
		binary.LittleEndian.PutUint64(d[8:], uint64(bf16Of(byte(w>>32), s))|uint64(bf16Of(byte(w>>40), s))<<16|
			uint64(bf16Of(byte(w>>48), s))<<32|uint64(bf16Of(byte(w>>56), s))<<48)
		v, d = v[8:], d[16:]
	}
	for i, b := range v {
		binary.LittleEndian.PutUint16(d[2*i:], bf16Of(b, s))
	}
}

// bf16Of is fp16Of for BF16.
func bf16Of(b byte, s float64) uint16 {
	const (
		sh     = 52 - 7
		rebias = (1023 - 127) << 52
		inc    = 1<<64 + 1<<(sh-1) - 1 - rebias // wraps: adds half an ulp less one, subtracts rebias
	)
	x := max(math.Float64bits(int8abs[b]*s), uint64(rebias))
	return uint16(b&0x80)<<8 | uint16((x+inc+(x>>sh)&1)>>sh)
}

// int8abs maps a byte to the magnitude of its value as an int8, as a
// float64: a load in place of a sign extension and a conversion.
var int8abs = func() (t [256]float64) {
	for b := range t {
		t[b] = math.Abs(float64(int8(b)))
	}
	return t
}()

// Bound returns the bound of the package's error statement for an
// element x of a group whose stored scale is s: the decoded value is
// within Bound(x, s) of x.
func (q Quant) Bound(x, s float64) float64 {
	u, t := math.Ldexp(1, -11), math.Ldexp(1, -25)
	if q.Format == BF16 {
		u, t = math.Ldexp(1, -8), math.Ldexp(1, -134)
	}
	return s/2 + u*(math.Abs(x)+s/2) + t
}

// Scale returns the stored scale of group g of an encoding of n bytes of
// weights, for checking Bound; 0 if g is out of range.
func (q Quant) Scale(enc []byte, n, g int) float64 {
	sz := q.EncodedSize(n)
	if sz < 0 || len(enc) != sz || g < 0 || 4*g+4 > sz-n/2 {
		return 0
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(enc[4*g:])))
}

// Decode16 and Encode16 convert one element of format f to and from
// float64 (rounding to nearest even): the conversions the quantizer uses,
// exported for tests and callers that build weights.
func (f Format) Decode16(b uint16) float64 { return f.decode(b) }

// Encode16 converts x to format f, rounding to nearest even; see Decode16.
func (f Format) Encode16(x float64) uint16 { return f.encode(x) }

// bits returns the mantissa width and exponent bias of f.
func (f Format) bits() (man uint, bias int) {
	if f == BF16 {
		return 7, 127
	}
	return 10, 15
}

func (f Format) decode(b uint16) float64 {
	man, bias := f.bits()
	expMax := uint64(1)<<(15-man) - 1
	sign := uint64(b&0x8000) << 48
	e := uint64(b>>man) & expMax
	m := uint64(b) & (1<<man - 1)
	switch e {
	case 0: // subnormal or zero: m units of the smallest subnormal
		return math.Float64frombits(sign | math.Float64bits(math.Ldexp(float64(m), 1-bias-int(man))))
	case expMax:
		if m != 0 {
			return math.NaN()
		}
		return math.Float64frombits(sign | 0x7ff<<52)
	}
	return math.Float64frombits(sign | (e-uint64(bias)+1023)<<52 | m<<(52-man))
}

// encode rounds x to the nearest value of format f, ties to even, with
// integer operations on x's bits: the significand is shifted to the unit
// of the target's last place (that of the smallest normal for subnormal
// results), and the bits shifted out decide the rounding. A carry out of
// the significand moves into the exponent, which is the right encoding;
// an exponent past the largest is infinity.
func (f Format) encode(x float64) uint16 {
	man, bias := f.bits()
	expMax := uint64(1)<<(15-man) - 1
	bits := math.Float64bits(x)
	sign := uint16(bits>>48) & 0x8000
	exp := int(bits>>52) & 0x7ff
	if exp >= 1024-bias && exp <= 1023+bias { // the result is normal or rounds up to infinity
		// Re-bias the exponent in place, add the rounding increment (just
		// under half the last place, plus one if the kept part is odd:
		// ties to even) and drop the low bits; a carry lands in the
		// exponent, as it must.
		sh := 52 - man
		abs := bits &^ (1 << 63)
		r := (abs - uint64(1023-bias)<<52 + (1<<(sh-1) - 1) + (abs>>sh)&1) >> sh
		return sign | uint16(min(r, expMax<<man))
	}
	frac := bits & (1<<52 - 1)
	switch {
	case exp == 0x7ff && frac != 0:
		return sign | uint16(expMax<<man) | 1<<(man-1)
	case exp == 0x7ff:
		return sign | uint16(expMax<<man)
	case exp == 0: // a float64 subnormal: far below half the smallest 16-bit subnormal
		return sign
	}
	e := exp - 1023
	lsb := max(e, 1-bias) - int(man) // the exponent of the result's last place
	shift := lsb - (e - 52)
	if shift >= 64 {
		return sign // below half the smallest subnormal
	}
	sig := frac | 1<<52
	q := sig >> shift
	rem := sig & (1<<shift - 1)
	if half := uint64(1) << (shift - 1); rem > half || (rem == half && q&1 == 1) {
		q++
	}
	out := q // subnormal: q units of the smallest subnormal
	if e >= 1-bias {
		if e+bias >= int(expMax) {
			return sign | uint16(expMax<<man)
		}
		out = uint64(e+bias)<<man + q - 1<<man
	}
	if out >= expMax<<man {
		return sign | uint16(expMax<<man)
	}
	return sign | uint16(out)
}
