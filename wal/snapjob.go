package wal

import (
	"errors"
	"io"
	"sync/atomic"
)

// A snapshot is encoded on the caller's goroutine and written to its file
// on a goroutine of its own (StartSnapshot): encoding is less than half of
// a snapshot's time (a million timers: 172 ms of 376, README), the rest
// being compression, writes and fsyncs, so the caller (a node between two
// blocks) waits for the encoding only. The
// payload passes between the two in chunks of snapChunkSize; at most
// snapQueueChunks of them wait for the writer before the encoding waits in
// turn, which bounds the memory a snapshot holds.

// snapQueueChunks bounds the chunks of a snapshot's payload held in memory
// (512 MiB; a million timers with the state root's tree take ~220 MB).
const snapQueueChunks = 512

// snapJob is a snapshot in flight: its payload on the way to the writer.
type snapJob struct {
	height uint64
	chunks chan []byte // the payload, in order; closed at its end
	free   chan []byte // chunks written, for the encoder to reuse
	failed atomic.Bool // the writer failed: the encoder may stop
	srcErr error       // the encoder's own failure, set before chunks closes
	done   chan struct{}
	err    error // the job's result, set before done closes
}

func newSnapJob(height uint64) *snapJob {
	return &snapJob{
		height: height,
		chunks: make(chan []byte, snapQueueChunks),
		free:   make(chan []byte, 4),
		done:   make(chan struct{}),
	}
}

// run writes the job's snapshot file, registers it and removes what it
// makes unneeded (cleanup); it is the job's goroutine.
func (l *Log) run(j *snapJob) {
	defer close(j.done)
	// An encoder of its own: the log's compresses one body at a time, and
	// Append would wait while it compresses a chunk here.
	zenc := l.zenc
	if zenc != nil {
		zenc = newZstdEncoder()
		defer zenc.Close()
	}
	err := l.installSnapshot(j.height, zenc, func(w io.Writer) error {
		for c := range j.chunks {
			if _, err := w.Write(c); err != nil {
				return err // the rest is drained below
			}
			select {
			case j.free <- c[:0]:
			default:
			}
		}
		return j.srcErr
	})
	if err != nil {
		// Stop the encoder, and never let it wait on a dead writer (which
		// may have failed before it read anything: at Create).
		j.failed.Store(true)
		for range j.chunks {
		}
	}
	j.err = err
}

// snapFeeder is the io.Writer that a snapshot's encoder writes to: it
// cuts the payload into chunks for the job's writer.
type snapFeeder struct {
	j   *snapJob
	buf []byte
}

func (f *snapFeeder) Write(p []byte) (int, error) {
	if f.j.failed.Load() {
		return 0, errWriterFailed
	}
	n := 0
	for n < len(p) {
		if f.buf == nil {
			select {
			case f.buf = <-f.j.free:
			default:
				f.buf = make([]byte, 0, snapChunkSize)
			}
		}
		k := copy(f.buf[len(f.buf):cap(f.buf)], p[n:])
		f.buf = f.buf[:len(f.buf)+k]
		n += k
		if len(f.buf) == cap(f.buf) {
			f.j.chunks <- f.buf
			f.buf = nil
		}
	}
	return n, nil
}

// end hands over the last chunk, or the encoder's failure, and closes the
// payload.
func (f *snapFeeder) end(err error) {
	if err == nil && len(f.buf) > 0 {
		f.j.chunks <- f.buf
	}
	if err != nil && !f.j.failed.Load() {
		f.j.srcErr = &sourceError{err}
	}
	close(f.j.chunks)
}

// errWriterFailed stops an encoder whose snapshot's writer has failed; the
// job's result says why, and it is what the caller gets.
var errWriterFailed = errors.New("wal: the snapshot's writer failed")

// errFillPanicked ends the payload of a snapshot whose fill panicked.
var errFillPanicked = errors.New("wal: the snapshot's fill panicked")

// startSnapshot checks a snapshot at height, syncs the log, starts its job
// and runs fill on the calling goroutine. When it returns nil the job may
// still be running. The caller holds wmu.
func (l *Log) startSnapshot(height uint64, fill func(w io.Writer) error) error {
	if err := l.prepareSnapshot(height); err != nil {
		return err
	}
	j := newSnapJob(height)
	l.job = j
	go l.run(j)
	f := &snapFeeder{j: j}
	ended := false
	defer func() {
		if !ended { // fill panicked: end the payload so that the job ends
			f.end(errFillPanicked)
			l.finishSnapshot()
		}
	}()
	err := fill(f)
	ended = true
	f.end(err)
	if err != nil {
		l.finishSnapshot()
		return j.err
	}
	return nil
}

// prepareSnapshot waits for the snapshot in flight, checks that the log
// can take a snapshot at height and syncs it. The caller holds wmu.
func (l *Log) prepareSnapshot(height uint64) error {
	l.finishSnapshot()
	if err := l.check(); err != nil {
		return err
	}
	if err := l.checkSnapshotHeight(height); err != nil {
		return err
	}
	return l.syncActive()
}

// finishSnapshot waits for the snapshot in flight, if any. The caller
// holds wmu. A failure of its writer has failed the log (check reports
// it); the job's own result is in job.err.
func (l *Log) finishSnapshot() {
	if l.job != nil {
		<-l.job.done
		l.job = nil
	}
}
