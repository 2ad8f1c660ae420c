// Package owner records which live object owns a resource — a memory
// region, a transport, a pool — so that a constructor can refuse a second
// owner: two pools handing out the same bytes, or two block managers over
// one pool, corrupt each other silently.
//
// An owner is held weakly: one that was dropped without being closed (and
// collected) no longer holds its resources, so an address the garbage
// collector reused is never refused.
package owner

import (
	"errors"
	"sync"
	"weak"
)

// ErrOwned is returned by Claim for a resource another live owner holds.
var ErrOwned = errors.New("already owned")

// Registry maps resources, named by an address, to their owners. The zero
// Registry is ready to use and safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	m  map[uintptr]entry
}

type entry struct {
	owner any         // the owner's weak.Pointer, comparable
	alive func() bool // whether the owner is still reachable
}

// Claim records o as the owner of the resource at key, or fails with
// ErrOwned if another owner that is still alive holds it. Claiming a key
// one already holds succeeds.
func Claim[T any](r *Registry, key uintptr, o *T) error {
	wp := weak.Make(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[key]; ok && e.owner != any(wp) && e.alive() {
		return ErrOwned
	}
	if r.m == nil {
		r.m = map[uintptr]entry{}
	}
	r.m[key] = entry{owner: wp, alive: func() bool { return wp.Value() != nil }}
	return nil
}

// Release forgets o's claim on key; a claim of another owner stays.
func Release[T any](r *Registry, key uintptr, o *T) {
	wp := weak.Make(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[key]; ok && e.owner == any(wp) {
		delete(r.m, key)
	}
}
