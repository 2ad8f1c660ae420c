package mmap

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var listCases = []struct {
	in   string
	want []int // nil with ok false: an error
	ok   bool
}{
	// What sysfs prints.
	{"", nil, true},
	{"\n", nil, true},
	{"0\n", []int{0}, true},
	{"0-3\n", []int{0, 1, 2, 3}, true},
	{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}, true},
	{"0,2,4,6", []int{0, 2, 4, 6}, true},
	{"5-5", []int{5}, true},
	{"63-65", []int{63, 64, 65}, true},
	{"65535", []int{65535}, true},
	{" 1-2 \t\n", []int{1, 2}, true},
	// What the kernel's parser accepts but sysfs never prints.
	{"3,1,2", []int{1, 2, 3}, true},
	{"0-4,2-6", []int{0, 1, 2, 3, 4, 5, 6}, true},
	{"1,1,1", []int{1}, true},
	{"007", []int{7}, true},
	// Malformed.
	{",", nil, false},
	{"0,", nil, false},
	{",0", nil, false},
	{"0,,1", nil, false},
	{"-", nil, false},
	{"-1", nil, false},
	{"1-", nil, false},
	{"3-1", nil, false},
	{"1-2-3", nil, false},
	{"+1", nil, false},
	{"1 ,2", nil, false},
	{"1\n2", nil, false},
	{"a", nil, false},
	{"0x10", nil, false},
	{"65536", nil, false},
	{"0-65536", nil, false},
	{"99999999999999999999999", nil, false},
	{"0-1023:2/256", nil, false},
	{"١", nil, false}, // a non-ASCII digit
}

func TestParseList(t *testing.T) {
	for _, c := range listCases {
		got, err := parseList(c.in)
		if !c.ok {
			if err == nil {
				t.Errorf("parseList(%q) = %v, want an error", c.in, got)
			} else if !errors.Is(err, errList) {
				t.Errorf("parseList(%q) error %v does not wrap errList", c.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// formatList prints an ascending list in the kernel's canonical form:
// maximal ranges, ascending, "N" for a range of one.
func formatList(list []int) string {
	var sb strings.Builder
	for i := 0; i < len(list); {
		j := i
		for j+1 < len(list) && list[j+1] == list[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(list[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(list[j]))
		}
		i = j + 1
	}
	return sb.String()
}

func TestFormatList(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{[]int{1, 3}, "1,3"},
	} {
		if got := formatList(c.in); got != c.want {
			t.Errorf("formatList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzParseList checks that parseList never panics and that what it accepts
// is an ascending set in range that survives a round trip through the
// canonical form.
func FuzzParseList(f *testing.F) {
	for _, c := range listCases {
		f.Add(c.in)
	}
	f.Add("0-65535")
	f.Add("0-65535,0-65535")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseList(s)
		if err != nil {
			if got != nil {
				t.Fatalf("parseList(%q) returned %v with error %v", s, got, err)
			}
			if !errors.Is(err, errList) {
				t.Fatalf("parseList(%q) error %v does not wrap errList", s, err)
			}
			return
		}
		for i, v := range got {
			if v < 0 || v >= maxListValue {
				t.Fatalf("parseList(%q) returned %d, out of range", s, v)
			}
			if i > 0 && got[i-1] >= v {
				t.Fatalf("parseList(%q) = %v: not strictly ascending", s, got)
			}
		}
		canon := formatList(got)
		again, err := parseList(canon)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("round trip of %q via %q: %v, %v; want %v", s, canon, again, err, got)
		}
		if formatList(again) != canon {
			t.Fatalf("canonical form of %q is not stable", s)
		}
		// Accepted input is made of digits, '-', ',' and outer blanks only.
		if strings.Trim(strings.Trim(s, " \t\n"), "0123456789-,") != "" {
			t.Fatalf("parseList accepted %q, which has other characters", s)
		}
	})
}
