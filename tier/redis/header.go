package redis

import (
	"fmt"

	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/internal/blockhdr"
)

// Every value is a block header (tier/internal/blockhdr) whose magic is
// "LKVR" and whose writer is a random number per Tier (never 0), then the
// payload: exactly HeaderSize + length bytes.
const HeaderSize = blockhdr.Size

var magic = [4]byte{'L', 'K', 'V', 'R'}

// parseValue decodes and validates a whole value: its header and its
// payload's length and checksum. It never panics: b of any length and
// content gives the header and payload, or an error wrapping
// tier.ErrCorrupt.
func parseValue(b []byte) (blockhdr.Header, []byte, error) {
	h, err := blockhdr.Parse(b, magic)
	if err != nil {
		return blockhdr.Header{}, nil, err
	}
	if h.Writer == 0 {
		return blockhdr.Header{}, nil, fmt.Errorf("%w: writer 0", tier.ErrCorrupt)
	}
	payload := b[HeaderSize:]
	if uint64(len(payload)) != uint64(h.Length) {
		return blockhdr.Header{}, nil, fmt.Errorf("%w: payload of %d bytes, header says %d (torn)", tier.ErrCorrupt, len(payload), h.Length)
	}
	if got := blockhdr.Checksum(payload); got != h.Sum {
		return blockhdr.Header{}, nil, fmt.Errorf("%w: payload checksum %08x, want %08x", tier.ErrCorrupt, got, h.Sum)
	}
	return h, payload, nil
}
