package disk

import "time"

// SetWriteChunk splits payload writes into pwrites of n bytes, so a crash
// lands mid-payload more often.
func (t *Tier) SetWriteChunk(n int, pause time.Duration) { t.writeChunk, t.chunkPause = n, pause }

// ParseHeader exposes the slot header parser to the tests.
func ParseHeader(b []byte) error { _, err := parseHeader(b); return err }

// Offset is slot's offset in the file.
func (t *Tier) Offset(slot int) int64 { return t.offset(slot) }

// HeaderOffset is the offset of slot's header in the file.
func (t *Tier) HeaderOffset(slot int) int64 { return t.offset(slot) + int64(payloadSpan(t.bs)) }
