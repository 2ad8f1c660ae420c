# Prints the golden block hashes of kv/hash_test.go.
#
# It computes block hashes the way vLLM's prefix cache does with
# --prefix-caching-hash-algo sha256_cbor or xxhash_cbor and PYTHONHASHSEED
# set to the seed: NONE_HASH = hash_fn(seed) (init_none_hash), and each full
# block hashes hash_fn((parent_or_NONE_HASH, tuple(token_ids), extra_keys)),
# where hash_fn serializes with cbor2.dumps(canonical=True) and digests with
# hashlib.sha256 or xxhash.xxh3_128_digest (vllm/utils/hashing.py), and
# extra_keys is None or a tuple: lora_name, then cache_salt in the first
# block only (generate_block_hash_extra_keys).
#
# Run with Debian's python3-cbor2 and python3-xxhash:
#   /usr/bin/python3 kv/testdata/vllm_hashes.py
import hashlib

import cbor2
import xxhash


def sha256_cbor(x):
    return hashlib.sha256(cbor2.dumps(x, canonical=True)).digest()


def xxhash_cbor(x):
    return xxhash.xxh3_128_digest(cbor2.dumps(x, canonical=True))


def chain(fn, seed, tokens, block_size, lora_name=None, salt=None):
    none_hash = fn(seed)
    parent, out = None, []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        extra = []
        if lora_name:
            extra.append(lora_name)
        if start == 0 and salt:
            extra.append(salt)
        h = fn((parent or none_hash, tuple(tokens[start:start + block_size]),
                tuple(extra) if extra else None))
        out.append(h)
        parent = h
    return none_hash, out


CASES = [
    ("two blocks", "", list(range(32)), 16, None, None),
    ("seed 0", "0", list(range(32)), 16, None, None),
    ("every width", "0", [0, 23, 24, 255, 256, 65535, 65536, 4294967295], 4, None, None),
    ("adapter", "0", list(range(100, 132)), 16, "sql-lora", None),
    ("salt", "0", list(range(100, 132)), 16, None, "tenant-a"),
    ("adapter and salt", "0", list(range(100, 132)), 16, "sql-lora", "tenant-a"),
    ("long block", "42", list(range(1000, 1300)), 300, None, None),
]

for name, fn in (("SHA256CBOR", sha256_cbor), ("XXH3CBOR", xxhash_cbor)):
    for case, seed, tokens, bs, lora, salt in CASES:
        root, hs = chain(fn, seed, tokens, bs, lora, salt)
        print('{%s, "%s", "%s", %d, "%s", "%s", "%s", []string{%s}},' % (
            name, case, seed, bs, lora or "", salt or "", root.hex(),
            ", ".join('"%s"' % h.hex() for h in hs)))
