package mmap

// View is a read-only mapping of a whole file that a Backing of WithFile
// owns, for a process (or goroutine) that only reads it: it takes no lock,
// so it may be opened while the owner has the file, and it cannot write a
// byte (the pages are mapped PROT_READ: a write faults). The bytes change
// under it as the owner writes them, so a reader needs a protocol of its
// own to know when what it read is whole (tier/host's Peer checks each
// row's header before and after its copy).
//
// Choose it to read another process's shared region; to own one, use New
// with WithFile. A View must not be copied; Close it when done.
type View struct {
	mem   []byte
	align int
	path  string
}

// OpenView maps the file at path read-only and shared. It fails with the
// system's error for a missing or unreadable file, with an error wrapping
// pool.ErrInvalidConfig for an empty one or one that is not a regular
// file (a FIFO, a device, a directory), and with one wrapping
// errors.ErrUnsupported off Linux.
func OpenView(path string) (*View, error) { return openView(path) }

// Bytes returns the file's bytes as mapped; nil after Close. They must
// not be used after Close.
func (v *View) Bytes() []byte {
	if v == nil {
		return nil
	}
	return v.mem
}

// Align returns the alignment New uses for this file's blocks: the page
// size, or the huge page size on hugetlbfs. A WithMeta area of n bytes
// ends, and block 0 starts, at n rounded up to it.
func (v *View) Align() int {
	if v == nil {
		return 0
	}
	return v.align
}

// Path returns the file's path.
func (v *View) Path() string {
	if v == nil {
		return ""
	}
	return v.path
}

// Close unmaps the file. Later calls do nothing.
func (v *View) Close() error {
	if v == nil || v.mem == nil {
		return nil
	}
	mem := v.mem
	v.mem = nil
	return unmap(mem)
}
