package merkle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/timerlane/timerlane/internal/prefetch"
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
		// In key order the nodes lie at random in their chunks: both
		// children's loads start now, and the right one's ends while the
		// left subtree is written. (One prefetch.Lines call for both
		// children, each node's first and last line, measured no faster:
		// 205-229 ms against 192-231 for BenchmarkWriteImage1M, 4
		// alternate rounds, -test.benchtime 5x.)
		t.prefetchNode(n.child[0])
		t.prefetchNode(n.child[1])
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

// ReadImage loads a tree from its image, read from r up to the image's
// end and not beyond. Nodes are parsed in r's buffer, without a copy.
func ReadImage(r *bufio.Reader) (*Tree, error) {
	head, err := r.Peek(len(imageMagic) + 8)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrImage, err)
	}
	if string(head[:len(imageMagic)]) != imageMagic {
		return nil, fmt.Errorf("%w: not a version 1 image", ErrImage)
	}
	n := binary.BigEndian.Uint64(head[len(imageMagic):])
	r.Discard(len(head))
	if n > uint64(maxIdx) {
		return nil, fmt.Errorf("%w: %d leaves", ErrImage, n)
	}
	t := New()
	if n == 0 {
		return t, nil
	}
	d := imageReader{r: r, t: t, left: n}
	root, err := d.node(-1)
	if err != nil {
		return nil, err
	}
	if d.left != 0 {
		return nil, fmt.Errorf("%w: %d leaves, the header says %d", ErrImage, n-d.left, n)
	}
	t.root, t.n, t.rootStale = root, int(n), true
	return t, nil
}

// imageReader checks the shape as it reads. Keys must ascend, bits must
// increase down every path, and for each internal node the last leaf
// before its child 1 and the first leaf in it must first differ at the
// node's bit. Those adjacent pairs are one per internal node, and a crit-bit
// tree is the only tree of its sorted keys in which each node's bit is
// where its pair first differs, so every leaf is then under the branches
// its key takes, checked in O(1) per node rather than a walk up its path.
type imageReader struct {
	r    *bufio.Reader
	t    *Tree
	left uint64   // leaves still to read
	prev [32]byte // the last leaf's key
	seen bool     // a leaf was read
	want int      // the bit at which the next leaf must first differ from prev, or -1
}

// next returns the next node's encoding, n bytes, valid until the next
// call; tag is its first byte.
func (d *imageReader) next() (tag byte, b []byte, err error) {
	b, err = d.r.Peek(innerLen)
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("%w: node: %v", ErrImage, err)
	}
	n := innerLen
	if b[0] == 1 {
		n = leafLen
	}
	if len(b) < n {
		return 0, nil, fmt.Errorf("%w: node: %v", ErrImage, err)
	}
	d.r.Discard(n)
	return b[0], b[:n], nil
}

// node reads the subtree whose parent branches on bit minBit (-1 for the
// root): its bit must be above it.
func (d *imageReader) node(minBit int) (ref, error) {
	tag, b, err := d.next()
	if err != nil {
		return 0, err
	}
	switch tag {
	case 1:
		if d.left == 0 {
			return 0, fmt.Errorf("%w: more leaves than the header says", ErrImage)
		}
		key, value := (*[32]byte)(b[1:33]), (*[32]byte)(b[33:leafLen])
		if d.seen {
			if bytes.Compare(key[:], d.prev[:]) <= 0 {
				return 0, fmt.Errorf("%w: leaf %x after leaf %x", ErrImage, key[:4], d.prev[:4])
			}
			if bit, _ := firstDiff(&d.prev, key); int(bit) != d.want {
				return 0, fmt.Errorf("%w: leaf %x under the wrong branch of bit %d", ErrImage, key[:4], d.want)
			}
		}
		d.prev, d.seen, d.want = *key, true, -1
		d.left--
		return d.t.newLeaf(key, value), nil
	case 0:
		bit := b[1]
		if int(bit) <= minBit {
			return 0, fmt.Errorf("%w: bit %d below bit %d above it", ErrImage, bit, minBit)
		}
		r := d.t.newInner()
		n := d.t.inner(r)
		n.bit = bit
		copy(n.hash[0][:], b[2:34])
		copy(n.hash[1][:], b[34:66])
		for dir := range 2 {
			if dir == 1 {
				d.want = int(bit)
			}
			c, err := d.node(int(bit))
			if err != nil {
				return 0, err
			}
			d.t.inner(r).child[dir] = c // the slab may have grown: look it up again
		}
		return r, nil
	default:
		return 0, fmt.Errorf("%w: node tag %d", ErrImage, tag)
	}
}

// prefetchNode starts loading node r.
func (t *Tree) prefetchNode(r ref) {
	if r&leafBit != 0 {
		prefetch.Line(unsafe.Pointer(t.leaf(r)))
	} else {
		prefetch.Line(unsafe.Pointer(t.inner(r)))
	}
}
