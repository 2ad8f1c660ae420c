// Package cuda puts locus pools and pages regions in GPU memory, registers
// host tiers with the driver, and copies batches of blocks between the two.
// It calls the CUDA driver (libcuda.so.1) at run time through purego: no cgo
// and no CUDA toolkit are needed to build, and a program that never calls
// Open never loads the driver. A program that does not import this package
// compiles none of it.
//
// Use it when KV blocks (or any fixed-size blocks) must live on the device
// and move to and from a host tier in bulk, once per scheduling step. Do not
// use it for host-only pools: backing/heap and backing/mmap are simpler.
//
// # The pieces
//
//   - Open loads the driver and retains a device's primary context.
//   - Device.NewRegion reserves one range of device addresses and maps
//     physical memory under it in the driver's granularity (2 MiB on current
//     GPUs). Region.Sleep releases the physical memory and keeps the
//     addresses; Region.Wake maps fresh, zeroed memory at the same addresses
//     (vLLM's sleep mode, as a backing operation).
//   - Device.NewBacking is a pool.Backing over a Region, for pool.New and
//     pages.New. Its blocks are device addresses (Backing.Ptr,
//     pool.Pool.DeviceAddr); Block returns no device memory (see Backing).
//   - Device.Register page-locks an existing host mapping (backing/mmap)
//     with cuMemHostRegister, at its exact size, so copies to and from it
//     run at DMA speed.
//   - Device.NewCopier copies batches of blocks: one driver call per batch
//     where the driver has cuMemcpyBatchAsync (CUDA 12.8+), otherwise one
//     cuMemcpyAsync per run of adjacent blocks, never one call per block.
//     Completion is owner-side: Copier.Poll reports finished jobs without
//     blocking and Copier.Wait blocks for one; no goroutine is started. (The
//     tier manager is meant to deliver these completions to its owner
//     through a locus transport, as the host tiers' CPU copies are.)
//
// # Contexts and threads
//
// CUDA binds a context to the calling OS thread, and goroutines move
// between threads. Every method that calls the driver locks its goroutine
// to its thread, makes the device's primary context current
// (cuCtxSetCurrent), makes its calls and unlocks: one extra foreign call
// per batch of calls. The alternative, one goroutine locked to a thread that
// all calls are sent to, costs two goroutine switches per batch and a
// goroutine per device; per-batch binding costs less and keeps the package
// free of goroutines. The primary context is the one the CUDA runtime (and
// so PyTorch) uses, so memory mapped here is visible to kernels launched by
// other libraries in the process.
//
// # Errors
//
// Failures wrap one of the sentinel errors (ErrNoDriver, ErrNoDevice,
// ErrOutOfMemory, ErrDriverTooOld, ErrInvalidArgument, ErrClosed, ErrJob)
// where one applies, and a driver failure is a *Error carrying the
// CUresult. Nothing here panics on a missing driver or device: Open returns
// an error, and tests skip. On platforms other than linux/amd64 and
// linux/arm64 Open fails with an error wrapping ErrNoDriver and
// errors.ErrUnsupported.
package cuda
