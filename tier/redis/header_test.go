package redis

import (
	"bytes"
	"errors"
	"testing"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
)

// parseValue never panics, and accepts only a value whose header and
// payload checksums hold; an accepted value encodes back to itself.
func FuzzParseValue(f *testing.F) {
	good := make([]byte, HeaderSize+16)
	copy(good[HeaderSize:], "0123456789abcdef")
	h := blockhdr.Header{Writer: 1, Gen: 2, Key: tier.KeyOf([]byte("k"), 3), Length: 16, Sum: blockhdr.Checksum(good[HeaderSize:])}
	h.Put(good, magic)
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add([]byte("LKVR"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, err := parseValue(b)
		if err != nil {
			if !errors.Is(err, tier.ErrCorrupt) {
				t.Fatalf("%v does not wrap tier.ErrCorrupt", err)
			}
			return
		}
		again := make([]byte, HeaderSize+len(payload))
		h.Put(again, magic)
		copy(again[HeaderSize:], payload)
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, encodes back to %x", b, again)
		}
	})
}
