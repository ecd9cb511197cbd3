package vm

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// CPIOWriter writes the "newc" cpio format (SVR4 without CRC), the only format the
// Linux kernel unpacks as an initramfs. Each entry is a 110-byte ASCII header
// ("070701" and thirteen 8-digit hex fields), the NUL-terminated name padded to a
// multiple of 4 bytes, then the data padded likewise; a "TRAILER!!!" entry ends the
// archive. Entries are written in call order, so a parent directory must come before
// its children; the writer creates missing parents itself.
type CPIOWriter struct {
	w    io.Writer
	ino  uint32
	dirs map[string]bool
	err  error
}

// NewCPIOWriter returns a writer that emits newc entries to w.
func NewCPIOWriter(w io.Writer) *CPIOWriter {
	return &CPIOWriter{w: w, ino: 1, dirs: map[string]bool{".": true, "": true}}
}

// Mode bits of the cpio header (the same as st_mode's S_IF* values).
const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

// Dir adds a directory (and any missing parents).
func (c *CPIOWriter) Dir(name string, perm fs.FileMode) error {
	name = cleanName(name)
	if c.dirs[name] {
		return c.err
	}
	if err := c.parents(name); err != nil {
		return err
	}
	c.dirs[name] = true
	return c.entry(name, cpioDir|uint32(perm.Perm()), 0, 0, nil)
}

// File adds a regular file with the given content.
func (c *CPIOWriter) File(name string, perm fs.FileMode, data []byte) error {
	name = cleanName(name)
	if err := c.parents(name); err != nil {
		return err
	}
	return c.entry(name, cpioFile|uint32(perm.Perm()), 0, 0, data)
}

// Symlink adds a symbolic link name -> target.
func (c *CPIOWriter) Symlink(name, target string) error {
	name = cleanName(name)
	if err := c.parents(name); err != nil {
		return err
	}
	return c.entry(name, cpioSymlink|0o777, 0, 0, []byte(target))
}

// CharDev adds a character device node, e.g. /dev/console (5, 1), which the kernel
// needs in the initramfs to give /init a console before devtmpfs is mounted.
func (c *CPIOWriter) CharDev(name string, perm fs.FileMode, major, minor uint32) error {
	name = cleanName(name)
	if err := c.parents(name); err != nil {
		return err
	}
	return c.entry(name, cpioChar|uint32(perm.Perm()), major, minor, nil)
}

// Close writes the trailer. It does not close the underlying writer.
func (c *CPIOWriter) Close() error {
	return c.entry("TRAILER!!!", 0, 0, 0, nil)
}

func cleanName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

func (c *CPIOWriter) parents(name string) error {
	if dir := path.Dir(name); !c.dirs[dir] {
		return c.Dir(dir, 0o755)
	}
	return c.err
}

func (c *CPIOWriter) entry(name string, mode, rmajor, rminor uint32, data []byte) error {
	if c.err != nil {
		return c.err
	}
	nlink := uint32(1)
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	ino := c.ino
	c.ino++
	if name == "TRAILER!!!" {
		ino, nlink = 0, 1
	}
	// Fields: magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
	// rdevmajor, rdevminor, namesize (including NUL), check (always 0 in newc).
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+8+len(data)+3)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	buf = append(buf, data...)
	buf = pad4(buf)
	if _, err := c.w.Write(buf); err != nil {
		c.err = fmt.Errorf("write cpio entry %s: %w", name, err)
	}
	return c.err
}

// pad4 pads b with NULs to a multiple of 4 bytes. Every entry starts 4-aligned,
// so padding the entry's running length is the same as padding the stream.
func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
