package blockhdr

import (
	"bytes"
	"errors"
	"testing"

	"github.com/locus-go/locus/tier"
)

var magic = [4]byte{'T', 'E', 'S', 'T'}

func TestRoundTripAndDamage(t *testing.T) {
	h := Header{Writer: 7, Gen: 9, Key: tier.KeyOf([]byte("k"), 3), Length: 16, Sum: Checksum([]byte("0123456789abcdef"))}
	b := make([]byte, Size)
	h.Put(b, magic)
	got, err := Parse(b, magic)
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := Parse(make([]byte, Size), magic); !errors.Is(err, ErrEmpty) {
		t.Errorf("all zero: %v", err)
	}
	if _, err := Parse(b, [4]byte{'X', 'E', 'S', 'T'}); !errors.Is(err, tier.ErrCorrupt) {
		t.Errorf("another medium's magic: %v", err)
	}
	for i := range Size {
		d := bytes.Clone(b)
		d[i] ^= 0x10
		if _, err := Parse(d, magic); !errors.Is(err, tier.ErrCorrupt) {
			t.Errorf("a flipped bit in byte %d was accepted", i)
		}
	}
	if _, err := Parse(b[:Size-1], magic); !errors.Is(err, tier.ErrCorrupt) {
		t.Errorf("short: %v", err)
	}
}

// FuzzParse: any bytes give a header that encodes back to them, or an
// error wrapping tier.ErrCorrupt; never a panic.
func FuzzParse(f *testing.F) {
	b := make([]byte, Size)
	(&Header{Gen: 1}).Put(b, magic)
	f.Add(b)
	f.Add(make([]byte, Size))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b, magic)
		if err != nil {
			if !errors.Is(err, tier.ErrCorrupt) {
				t.Fatalf("error %v does not wrap tier.ErrCorrupt", err)
			}
			return
		}
		again := make([]byte, Size)
		h.Put(again, magic)
		if !bytes.Equal(again, b[:Size]) {
			t.Fatal("a header that parses does not encode back to its bytes")
		}
	})
}
