// Package typednil tells a nil component apart from a usable one.
//
// A constructor that takes an interface (a pool backing, a transport, an
// option) sees a nil pointer wrapped in a non-nil interface as non-nil, and
// would panic later when it calls a method through it. Is catches that case
// up front, so the constructor can return an error instead.
package typednil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, func, channel, map,
// slice or unsafe pointer.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Chan, reflect.Map, reflect.Slice, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
