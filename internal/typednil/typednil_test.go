package typednil

import "testing"

type iface interface{ M() }

type ptr struct{}

func (*ptr) M() {}

type fn func()

func (fn) M() {}

type val struct{}

func (val) M() {}

func TestIs(t *testing.T) {
	var nilIface iface
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"untyped nil", nil, true},
		{"nil interface", nilIface, true},
		{"typed nil pointer", iface((*ptr)(nil)), true},
		{"typed nil func", iface(fn(nil)), true},
		{"nil map", map[int]int(nil), true},
		{"nil slice", []byte(nil), true},
		{"nil chan", (chan int)(nil), true},
		{"pointer", iface(&ptr{}), false},
		{"func", iface(fn(func() {})), false},
		{"value", iface(val{}), false},
		{"zero int", 0, false},
		{"empty slice", []byte{}, false},
	} {
		if got := Is(c.v); got != c.want {
			t.Errorf("%s: Is = %v, want %v", c.name, got, c.want)
		}
	}
}
