package redis

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/locus-go/locus/tier"
)

// parseValue never panics, and accepts only a value whose header and
// payload checksums hold; an accepted value encodes back to itself.
func FuzzParseValue(f *testing.F) {
	good := make([]byte, HeaderSize+16)
	copy(good[HeaderSize:], "0123456789abcdef")
	h := header{writer: 1, gen: 2, key: tier.KeyOf([]byte("k"), 3), length: 16, sum: crc32.Checksum(good[HeaderSize:], castagnoli)}
	h.put(good)
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
		h.put(again)
		copy(again[HeaderSize:], payload)
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, encodes back to %x", b, again)
		}
	})
}
