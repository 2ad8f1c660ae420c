package main

import "syscall"

// oDirect opens the disk limit's file for I/O that bypasses the page
// cache, as tier/disk's WithDirectIO opens the tier's.
const oDirect = syscall.O_DIRECT
