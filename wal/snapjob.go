package wal

import (
	"errors"
	"io"
)

// A snapshot is encoded on the caller's goroutine and written to its file
// on a goroutine of its own (StartSnapshot): encoding is less than half of
// a snapshot's time (a million timers: a median of 172 ms, against
// 358-425 ms for the whole snapshot inline, docs/DURABILITY.md), the rest
// being compression, writes and fsyncs, so the caller (a node between two
// blocks) waits for the encoding only. The
// payload passes between the two in chunks of snapChunkSize; at most
// snapQueueChunks of them wait for the writer before the encoding waits in
// turn, which bounds the memory a snapshot holds.

// snapQueueChunks bounds the chunks of a snapshot's payload queued for the
// writer. With the one being written, the one being filled and up to
// snapFreeChunks written ones kept for reuse, a snapshot in flight holds
// at most snapQueueChunks+2+snapFreeChunks chunks of payload (518 MiB),
// and the writer's two buffers of about a chunk (the framed chunk, and
// its own chunk, used only for a short last one). The encoding of a
// million timers with the state root's tree allocates 161-185 MB (docs/DURABILITY.md).
const snapQueueChunks = 512

// snapFreeChunks is how many written chunks wait for the encoder to reuse:
// a few spare it allocations when the writer keeps up with it.
const snapFreeChunks = 4

// snapJob is a snapshot in flight: its payload on the way to the writer.
type snapJob struct {
	height uint64
	chunks chan []byte   // the payload, in order; closed at its end
	free   chan []byte   // chunks written, for the encoder to reuse
	stop   chan struct{} // closed when the writer has failed: it takes no more
	srcErr error         // the encoder's own failure, set before chunks closes
	done   chan struct{}
	err    error // the job's result, set before done closes
}

func newSnapJob(height uint64) *snapJob {
	return &snapJob{
		height: height,
		chunks: make(chan []byte, snapQueueChunks),
		free:   make(chan []byte, snapFreeChunks),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// run writes the job's snapshot file, registers it and removes what it
// makes unneeded (installSnapshot); it is the job's goroutine.
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
				return err
			}
			select {
			case j.free <- c[:0]:
			default:
			}
		}
		return j.srcErr
	})
	if err != nil {
		// The encoder's next write fails (it may not have begun: the file
		// could not be created); what it queued before goes at once.
		close(j.stop)
		for range j.chunks {
		}
	}
	// The payload has ended (chunks is closed, so the encoder is done
	// with free): the chunks kept for reuse go too, not with the job,
	// which the log holds until a call waits for it.
	for len(j.free) > 0 {
		<-j.free
	}
	j.err = err
}

// snapFeeder is the io.Writer that a snapshot's encoder writes to: it
// cuts the payload into chunks for the job's writer.
type snapFeeder struct {
	j   *snapJob
	buf []byte
}

// Write fails as soon as the writer has failed: a large p is not cut
// into chunks that nobody will write.
func (f *snapFeeder) Write(p []byte) (int, error) {
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
			if err := f.send(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// send hands the chunk in hand to the writer, or fails if the writer has.
func (f *snapFeeder) send() error {
	c := f.buf
	f.buf = nil
	// The writer's failure first: with room in the queue, a select of
	// both would go on sending half the time.
	select {
	case <-f.j.stop:
		return errWriterFailed
	default:
	}
	select {
	case f.j.chunks <- c:
		return nil
	case <-f.j.stop:
		return errWriterFailed
	}
}

// end hands over the last chunk, or the encoder's failure, and closes the
// payload. The writer reads srcErr only if it takes the payload to its
// end, after chunks closes.
func (f *snapFeeder) end(err error) {
	if err == nil && len(f.buf) > 0 {
		f.send() // if the writer has failed, the job's result says so
	}
	if err != nil {
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
