package ring

// List is an intrusive FIFO list of arena nodes. The zero List is empty.
// A node is on at most one list at a time.
type List struct {
	Head, Tail uint32
	Len        int
}

// PushBack appends node i.
func (l *List) PushBack(a *Arena, i uint32) {
	n := a.At(i)
	n.prev, n.next = l.Tail, Nil
	if l.Tail == Nil {
		l.Head = i
	} else {
		a.At(l.Tail).next = i
	}
	l.Tail = i
	l.Len++
}

// Remove unlinks node i, which must be on l.
func (l *List) Remove(a *Arena, i uint32) {
	n := a.At(i)
	if n.prev == Nil {
		l.Head = n.next
	} else {
		a.At(n.prev).next = n.next
	}
	if n.next == Nil {
		l.Tail = n.prev
	} else {
		a.At(n.next).prev = n.prev
	}
	n.next, n.prev = Nil, Nil
	l.Len--
}

// PopFront unlinks and returns the first node, or Nil if l is empty.
func (l *List) PopFront(a *Arena) uint32 {
	i := l.Head
	if i != Nil {
		l.Remove(a, i)
	}
	return i
}

// Append moves every node of m to the end of l, keeping their order, in O(1).
func (l *List) Append(a *Arena, m *List) {
	if m.Head == Nil {
		return
	}
	if l.Tail == Nil {
		l.Head = m.Head
	} else {
		a.At(l.Tail).next = m.Head
		a.At(m.Head).prev = l.Tail
	}
	l.Tail = m.Tail
	l.Len += m.Len
	*m = List{}
}
