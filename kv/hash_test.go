package kv

import (
	"encoding/hex"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
)

func span(from, to uint32) []uint32 {
	s := make([]uint32, 0, to-from)
	for t := from; t < to; t++ {
		s = append(s, t)
	}
	return s
}

// vllmVectors are block hashes computed by vLLM's algorithm in Python
// (kv/testdata/vllm_hashes.py: cbor2 canonical encoding, hashlib.sha256 and
// xxhash.xxh3_128_digest, PYTHONHASHSEED = seed).
var vllmVectors = []struct {
	algo          HashAlgo
	name, seed    string
	tokens        []uint32
	blockSize     int
	adapter, salt string
	root          string
	hashes        []string
}{
	{SHA256CBOR, "two blocks", "", span(0, 32), 16, "", "", "8d33f520a3c4cef80d2453aef81b612bfe1cb44c8b2025630ad38662763f13d3", []string{"7e291191706c2eff0b6edcba2423b70cc5fbc3675844947dcae6a33e0a98d586", "d0eaf5db8a4f522ab94a2f779c2238589753e1e8977c95de22b626f230fb237e"}},
	{SHA256CBOR, "seed 0", "0", span(0, 32), 16, "", "", "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e", []string{"d830de3d42c00f25a2949b5d12d98642664a44872c1614c5b0147556276afc9c", "fedd9e4abebebbe6f6cf96b682f08d316063fe2f22a5c552192dd62904fcccac"}},
	{SHA256CBOR, "every width", "0", []uint32{0, 23, 24, 255, 256, 65535, 65536, 4294967295}, 4, "", "", "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e", []string{"ca90027d467f8ae0c02e71aa4eff29f116d1b74ca16446a60ab640f53e976f43", "fabd8e12e7d8d54418d0a583d8a28c5d5739bff376f10eb24575cf52e0e0a83a"}},
	{SHA256CBOR, "adapter", "0", span(100, 132), 16, "sql-lora", "", "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e", []string{"b25d7185e16aefccefcc9f6cd6a0c93c88b7ab12ffb1969c26ce41f50a7e3a4c", "9f12aded8b269c2685b7ce9dc8042393764bca949c6fbb6a5eac016d4f9110c2"}},
	{SHA256CBOR, "salt", "0", span(100, 132), 16, "", "tenant-a", "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e", []string{"18cbb49ed7d21f6e6b5ed2dfe523ef9d4df25407f42cdc561a93f8b08d5b18b9", "4415f16386c7d5d70e67c04dbf4b7ee72c20fdebc1f31cbce220bb769b900210"}},
	{SHA256CBOR, "adapter and salt", "0", span(100, 132), 16, "sql-lora", "tenant-a", "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e", []string{"91c1e3b04f20fd45db5d9f064ab7a269ab7ed425c27dced6e868f7e4cc50e9ae", "155457494f5e22851a84998bd4018468cabb46288ed64df8be17f2b775cc9400"}},
	{SHA256CBOR, "long block", "42", span(1000, 1300), 300, "", "", "9fa6eb003f14425eb9c8e6baacfbcaab26257357b829c7bfa74ffcc4f31c1780", []string{"a2ce67f219cbf9c4437b4420887e870960e8ce532d7deea039c9fb6c6b8894c4"}},
	{XXH3CBOR, "two blocks", "", span(0, 32), 16, "", "", "902bbcf97174df1ea0a482954fa7b32a", []string{"36a0628f5f1af6c2b17de54f179152c5", "9ff4246c9ef27ef4cfd8ac33c94cd600"}},
	{XXH3CBOR, "seed 0", "0", span(0, 32), 16, "", "", "1ebe36576dcb573f26b99533a20aaeca", []string{"209f5d549fc07c8e39d823615ede61ce", "03888914ee75b87e89df867a21beb72b"}},
	{XXH3CBOR, "every width", "0", []uint32{0, 23, 24, 255, 256, 65535, 65536, 4294967295}, 4, "", "", "1ebe36576dcb573f26b99533a20aaeca", []string{"cd09d8ae700da635d72fa41ccddba746", "9f826ad6c8427da8523283f9976b77b0"}},
	{XXH3CBOR, "adapter", "0", span(100, 132), 16, "sql-lora", "", "1ebe36576dcb573f26b99533a20aaeca", []string{"cde46e11481a5f80d34c224d63a33ff0", "2a8201be037bc6f0c127e3db35bb6205"}},
	{XXH3CBOR, "salt", "0", span(100, 132), 16, "", "tenant-a", "1ebe36576dcb573f26b99533a20aaeca", []string{"cfd3e02a79045b0d0b8c5851a4049a5f", "252a2bc42595439095ba818bc78346e8"}},
	{XXH3CBOR, "adapter and salt", "0", span(100, 132), 16, "sql-lora", "tenant-a", "1ebe36576dcb573f26b99533a20aaeca", []string{"5df4d2f1d0615fef968a7231ac8f120e", "2fef746136f18396a21aa1262735a9fd"}},
	{XXH3CBOR, "long block", "42", span(1000, 1300), 300, "", "", "a9d2e63407fce1a26c9dc9d7fa2d7caf", []string{"5cc6355a167a7086868f8496d264d006"}},
}

func TestHashesMatchVLLM(t *testing.T) {
	for _, v := range vllmVectors {
		t.Run(v.algo.String()+"/"+v.name, func(t *testing.T) {
			h, err := NewHasher(v.algo, v.seed)
			require.NoError(t, err)
			require.Equal(t, v.root, h.Root().String())
			got := h.AppendHashes(nil, v.tokens, v.blockSize, Key{Adapter: v.adapter, Salt: v.salt})
			require.Len(t, got, len(v.hashes))
			for i, g := range got {
				require.Equal(t, v.hashes[i], g.String(), "block %d", i)
				raw, _ := hex.DecodeString(v.hashes[i])
				require.Equal(t, raw, g.AppendBytes(nil))
				require.Equal(t, len(raw), g.Len())
			}
		})
	}
}

func TestHashUint64IsVLLMsIntegerForm(t *testing.T) {
	// vLLM: int.from_bytes(digest, "big") & (1<<64 - 1); llm-d: the last 8
	// bytes, big-endian.
	raw, _ := hex.DecodeString(vllmVectors[0].hashes[0])
	var want uint64
	for _, b := range raw[len(raw)-8:] {
		want = want<<8 | uint64(b)
	}
	h, _ := NewHasher(SHA256CBOR, "")
	got := h.AppendHashes(nil, span(0, 16), 16, Key{})
	require.Equal(t, want, got[0].Uint64())
	require.Zero(t, Hash{}.Uint64())
	require.True(t, Hash{}.IsZero())
	require.Empty(t, Hash{}.String())
}

func TestNewHasherRejectsUnknownAlgo(t *testing.T) {
	for _, a := range []HashAlgo{0, 3, 255} {
		_, err := NewHasher(a, "")
		require.Error(t, err)
	}
	require.Equal(t, "HashAlgo(9)", HashAlgo(9).String())
}

// cborEncoding is the reference encoding of a block: the well-kept CBOR
// library's canonical mode over the same values.
func cborEncoding(t testing.TB, parent []byte, tokens []uint32, extras []string) []byte {
	em, err := cbor.CanonicalEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	var ex any
	if len(extras) > 0 {
		ex = extras
	}
	if tokens == nil {
		tokens = []uint32{}
	}
	b, err := em.Marshal([]any{parent, tokens, ex})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzBlockEncoding checks the hasher's allocation-free encoder against the
// CBOR library byte for byte.
func FuzzBlockEncoding(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, "", "", true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 24, 0, 0, 0}, "sql-lora", "tenant", false)
	f.Add(make([]byte, 4*300), "a", "", true)
	f.Fuzz(func(t *testing.T, raw []byte, adapter, salt string, first bool) {
		tokens := make([]uint32, len(raw)/4)
		for i := range tokens {
			tokens[i] = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
		}
		for _, algo := range []HashAlgo{SHA256CBOR, XXH3CBOR} {
			h, err := NewHasher(algo, "seed")
			if err != nil {
				t.Fatal(err)
			}
			parent := Hash{}
			if !first {
				parent = h.Block(Hash{}, []uint32{1}, Key{})
			}
			got := h.Block(parent, tokens, Key{Adapter: adapter, Salt: salt})
			p := parent
			if first {
				p = h.Root()
			}
			var extras []string
			if adapter != "" {
				extras = append(extras, adapter)
			}
			if first && salt != "" {
				extras = append(extras, salt)
			}
			want := cborEncoding(t, p.AppendBytes(nil), tokens, extras)
			if string(h.buf) != string(want) {
				t.Fatalf("encoding\n got %x\nwant %x", h.buf, want)
			}
			if got != h.digest(want) {
				t.Fatal("digest differs")
			}
		}
	})
}

func TestBlockEncodingMatchesCBORLibrary(t *testing.T) {
	h, _ := NewHasher(SHA256CBOR, "")
	require.Equal(t, cborEncoding(t, []byte{}, nil, nil)[1:], []byte{0x40, 0x80, 0xf6}) // sanity of the reference
	seedEnc, err := cbor.Marshal("seed")
	require.NoError(t, err)
	h2, _ := NewHasher(SHA256CBOR, "seed")
	require.Equal(t, h2.digest(seedEnc), h2.Root())
	h.Block(Hash{}, span(0, 300), Key{Adapter: string(make([]byte, 300))})
	require.Equal(t, cborEncoding(t, h.Root().AppendBytes(nil), span(0, 300), []string{string(make([]byte, 300))}), h.buf)
}
