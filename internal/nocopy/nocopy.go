// Package nocopy marks types that must not be copied after first use.
package nocopy

// NoCopy, embedded as a field, makes go vet's copylocks check flag a copy
// of the type that holds it: a copied pool, manager or publisher would
// share its metadata with the original and corrupt both. It has no size
// and no cost.
type NoCopy struct{}

// Lock is a no-op; it exists for go vet.
func (*NoCopy) Lock() {}

// Unlock is a no-op; it exists for go vet.
func (*NoCopy) Unlock() {}
