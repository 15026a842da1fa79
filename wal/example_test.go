package wal_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/timerlane/timerlane/wal"
)

// Example writes three blocks and a snapshot to a log on the operating
// system's files, reopens it and reads the state back: the snapshot, then
// each block after it. It uses only what a program outside the module can
// name (wal.OS).
func Example() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(wal.OS, dir, wal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for h := uint64(1); h <= 3; h++ {
		if err := l.Append(h, fmt.Appendf(nil, "block %d", h)); err != nil {
			log.Fatal(err)
		}
		if h == 2 {
			if err := l.WriteSnapshot(2, bytes.NewReader([]byte("state after 2"))); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open(wal.OS, dir, wal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	h, r, ok, err := l.OpenSnapshot()
	if err != nil {
		log.Fatal(err)
	}
	if ok {
		state, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("snapshot at %d: %s\n", h, state)
	}
	err = l.Replay(func(h uint64, body []byte) error {
		fmt.Printf("record %d: %s\n", h, body)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// snapshot at 2: state after 2
	// record 3: block 3
}
