//go:build !linux

package main

// oDirect: no O_DIRECT here; tier/disk's WithDirectIO falls back to
// buffered I/O too, so the limit never asks for it.
const oDirect = 0
