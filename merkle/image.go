package merkle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// An image is a tree with every hash it caches, so that a restart can load
// it without hashing (TREE.md, "Image"):
//
//	"TLTREE" || version[1] = 1 || n_leaves[8]
//	|| the nodes in pre-order (child 0 before child 1):
//	   internal node: 0x00 || bit[1] || hash(child 0)[32] || hash(child 1)[32]
//	   leaf:          0x01 || key[32] || value hash[32]
//
// ReadImage checks the shape (bits increase down every path, each leaf's
// key takes the branches that lead to it, keys ascend, the count is right)
// but not the hashes, which is the point of an image: it is trusted like
// the file it travels in, whose checksum covers it. A wrong cached hash
// gives a wrong root at once (at the root) or once a change rehashes its
// path, or a wrong proof; whoever cannot trust the file rebuilds the tree
// from its leaves instead.

const imageMagic = "TLTREE\x01"

// ErrImage is an image ReadImage cannot load.
var ErrImage = errors.New("merkle: bad tree image")

// Encoded node lengths.
const (
	leafLen  = 1 + 32 + 32
	innerLen = 1 + 1 + 32 + 32
)

// WriteImage writes t's image to w; it first rehashes what changed.
func (t *Tree) WriteImage(w io.Writer) error {
	t.Root()
	var buf [innerLen]byte
	head := binary.BigEndian.AppendUint64(append(buf[:0], imageMagic...), uint64(t.n))
	if _, err := w.Write(head); err != nil {
		return err
	}
	if t.n == 0 {
		return nil
	}
	var write func(r ref) error
	write = func(r ref) error {
		if r&leafBit != 0 {
			l := t.leaf(r)
			buf[0] = 1
			copy(buf[1:33], l.key[:])
			copy(buf[33:leafLen], l.value[:])
			_, err := w.Write(buf[:leafLen])
			return err
		}
		n := t.inner(r)
		buf[0], buf[1] = 0, n.bit
		copy(buf[2:34], n.hash[0][:])
		copy(buf[34:innerLen], n.hash[1][:])
		if _, err := w.Write(buf[:innerLen]); err != nil {
			return err
		}
		if err := write(n.child[0]); err != nil {
			return err
		}
		return write(n.child[1])
	}
	return write(t.root)
}

// ReadImage loads a tree from its image, read from r up to the image's end.
func ReadImage(r io.Reader) (*Tree, error) {
	var head [len(imageMagic) + 8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrImage, err)
	}
	if string(head[:len(imageMagic)]) != imageMagic {
		return nil, fmt.Errorf("%w: not a version 1 image", ErrImage)
	}
	n := binary.BigEndian.Uint64(head[len(imageMagic):])
	if n > uint64(maxIdx) {
		return nil, fmt.Errorf("%w: %d leaves", ErrImage, n)
	}
	t := New()
	if n == 0 {
		return t, nil
	}
	d := imageReader{r: r, t: t, left: n}
	root, err := d.node(0, -1)
	if err != nil {
		return nil, err
	}
	if d.left != 0 {
		return nil, fmt.Errorf("%w: %d leaves, the header says %d", ErrImage, n-d.left, n)
	}
	t.root, t.n, t.rootStale = root, int(n), true
	return t, nil
}

type imageReader struct {
	r    io.Reader
	t    *Tree
	left uint64 // leaves still to read
	buf  [innerLen]byte
	path [257]branch // the branches taken from the root
	prev [32]byte    // the last leaf's key
	seen bool        // a leaf was read
}

type branch struct {
	bit uint8
	dir int
}

// node reads the subtree at depth d, whose parent branches on bit minBit
// (-1 for the root): its bit must be above it.
func (d *imageReader) node(depth int, minBit int) (ref, error) {
	if _, err := io.ReadFull(d.r, d.buf[:1]); err != nil {
		return 0, fmt.Errorf("%w: node: %v", ErrImage, err)
	}
	switch d.buf[0] {
	case 1:
		if d.left == 0 {
			return 0, fmt.Errorf("%w: more leaves than the header says", ErrImage)
		}
		if _, err := io.ReadFull(d.r, d.buf[1:leafLen]); err != nil {
			return 0, fmt.Errorf("%w: leaf: %v", ErrImage, err)
		}
		var key, value [32]byte
		copy(key[:], d.buf[1:33])
		copy(value[:], d.buf[33:leafLen])
		for _, p := range d.path[:depth] {
			if bitAt(&key, p.bit) != p.dir {
				return 0, fmt.Errorf("%w: leaf %x under the wrong branch of bit %d", ErrImage, key[:4], p.bit)
			}
		}
		if d.seen && bytes.Compare(key[:], d.prev[:]) <= 0 {
			return 0, fmt.Errorf("%w: leaf %x after leaf %x", ErrImage, key[:4], d.prev[:4])
		}
		d.prev, d.seen = key, true
		d.left--
		return d.t.newLeaf(&key, &value), nil
	case 0:
		if _, err := io.ReadFull(d.r, d.buf[1:innerLen]); err != nil {
			return 0, fmt.Errorf("%w: internal node: %v", ErrImage, err)
		}
		bit := d.buf[1]
		if int(bit) <= minBit {
			return 0, fmt.Errorf("%w: bit %d below bit %d above it", ErrImage, bit, minBit)
		}
		r := d.t.newInner()
		n := d.t.inner(r)
		n.bit = bit
		copy(n.hash[0][:], d.buf[2:34])
		copy(n.hash[1][:], d.buf[34:66])
		for dir := range 2 {
			d.path[depth] = branch{bit, dir}
			c, err := d.node(depth+1, int(bit))
			if err != nil {
				return 0, err
			}
			d.t.inner(r).child[dir] = c // the slab may have grown: look it up again
		}
		return r, nil
	default:
		return 0, fmt.Errorf("%w: node tag %d", ErrImage, d.buf[0])
	}
}
