package kv

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Reserve makes a live sequence hold blocks for exactly n slots beyond its
// tokens: the lookahead slots of speculative decoding, where the KV of n
// draft tokens is written before the target model verifies them. It
// allocates the blocks missing, or gives back the lookahead blocks beyond n
// (Reserve(id, 0) gives them all back), and copies the block the next token
// goes to if another sequence shares it (copy-on-write), so that the
// drafts write only blocks the sequence holds alone. The sequence's tokens
// do not change and nothing is hashed or cached: the slots hold no accepted
// token yet. Block(id, i) gives the block of slot i, for Tokens <= i <
// Tokens+n, and Blocks lists the lookahead blocks after the others; they
// count in Stats.Reserved, within InUse.
//
// Like Append it is all or nothing: it fails with an *ExhaustedError
// (matching pool.ErrExhausted) before changing anything when the free and
// evictable blocks are too few, and with pool.ErrInvalidArgument for n < 0.
//
// Use it once per speculative step, then Accept. Do not use it to
// pre-allocate a sequence's whole output: held slots are blocks nobody else
// can use, and a scheduler that wants headroom should read CanAdmit's
// Available instead.
func (m *Manager) Reserve(id SeqID, n int) error {
	si, ok := m.liveSeq(id)
	if !ok {
		return m.seqError(id)
	}
	if n < 0 {
		return fmt.Errorf("kv: %w: reserve %d slots", pool.ErrInvalidArgument, n)
	}
	return m.extend(si, nil, n)
}

// Accept ends a speculative step: it appends the accepted tokens (the
// accepted prefix of the drafts and, usually, the target model's own next
// token) into the slots Reserve made, and gives back every lookahead slot
// beyond them. The slots of the rejected drafts roll back (counted in
// Stats.RolledBackTokens), and the lookahead blocks that hold none of the
// accepted tokens return to the pool. Blocks that became full with accepted
// tokens are hashed and enter the prefix cache; a block is never hashed
// with a rejected draft in it. Accept(id, nil) rejects every draft.
//
// Tokens beyond the reservation are appended as Append would, so Accept may
// allocate and then fails, changing nothing, with an *ExhaustedError when
// it cannot; with no more tokens than were reserved, and no Fork since
// Reserve sharing the block they go to, it cannot fail for lack of blocks. Without speculation use Append, which keeps whatever
// reservation the tokens did not fill.
func (m *Manager) Accept(id SeqID, accepted []uint32) error {
	si, ok := m.liveSeq(id)
	if !ok {
		return m.seqError(id)
	}
	return m.extend(si, accepted, 0)
}
