// Package wal is timerlane's write-ahead log: an append-only log of segment
// files holding one record per committed block (the block's changes, as an
// opaque body the engine encodes), and periodic snapshots (full checkpoints
// of the state, an opaque byte stream). Open recovers the state of the last
// durable block: the newest valid snapshot plus the records after it.
//
// # Using it
//
//	l, err := wal.Open(wal.OS, dir, wal.Options{})  // SyncEveryBlock, S2, 64 MiB segments
//	h, r, ok, err := l.OpenSnapshot()                // the state at h, if any
//	err = l.Replay(func(height uint64, body []byte) error { ... })  // then each block after it
//	for each committed block:
//	    err = l.Append(height, body)                 // durable when it returns nil
//	every N blocks:
//	    err = l.WriteSnapshot(height, stateReader)   // old segments go
//	    (or l.StartSnapshot(height, encode): the file is written in the background)
//	on a reorg back to block h:
//	    err = l.Truncate(h, writeStateAtH)           // blocks above h go; Append takes h+1
//	err = l.Close()
//
// Heights are at least 1 and contiguous: Append takes LastHeight()+1 (an
// empty log takes any first height). A height numbers a record, not a
// block of the chain (the engine writes none for an empty block), so the
// log's errors say "record N" for the record of height N. A body is the
// block's changes in the engine's own encoding; the log compresses it and
// gives it back byte for byte. The log never interprets bodies or
// snapshots.
//
// # Durability
//
// A block is durable once a sync that covers it has returned:
//
//   - SyncEveryBlock (the default): Append writes the record and fsyncs
//     before it returns; DurableHeight() == LastHeight() after each nil.
//   - SyncInterval(d): group commit. Append only writes; a background
//     goroutine fsyncs every d if anything is unsynced, one fsync covering
//     every block since the last. DurableHeight() says how far that got;
//     Sync() forces a sync now. A failed background sync fails the log and
//     the next call reports it (Close, if none comes).
//   - SyncNone: no fsync but those of Sync, WriteSnapshot(Func),
//     StartSnapshot, Truncate, segment rotation and Close.
//
// Directory entries are made durable too: the log's directory (and any
// parent it creates) is fsynced after a segment or snapshot is created,
// renamed or removed. A new segment is created, its header written and
// fsynced and the directory fsynced, after the previous segment was
// fsynced, before any record goes into it; so every segment but the last is
// complete. Then the file NEWEST is raised to the new segment's first
// record (see Files): a bound that no segment reaches is a lost newest
// segment, not a crash.
//
// # Failures
//
// A filesystem error in Append, Sync, WriteSnapshot, Truncate (or a
// background sync, or a snapshot written in the background) puts the Log
// in a failed state: that call returns a *FailedError, which matches
// ErrFailed and the filesystem's error (errors.Is(err, syscall.ENOSPC)),
// and every later call returns it too, until the Log is closed and
// reopened. A failure in the background is returned by the next call
// (WaitSnapshot waits for the snapshot and returns it). Only the first
// failure is kept: a later one changes nothing. Close returns the failure
// if no call has returned it (Err, which only looks, does not count), and
// nil if one has: the caller sees it at least once, from Close at the
// latest, and Close does not repeat it. A failed Log writes nothing more:
// a snapshot being written in the background is not renamed into place
// (its temporary file goes), or if its rename had begun, removes no older
// file. The Log's heights stay at the last durable block (LastHeight does
// not advance on a failed Append). The block whose Append
// failed may or may not be in the files (its bytes may have reached the
// disk before the fsync failed): the state to continue from is what a
// fresh Open recovers, the block before or the failed block itself, never
// anything else. Failing to read the caller's snapshot stream fails only
// that WriteSnapshot (or StartSnapshot).
//
// # Recovery
//
// Open lists the directory (reading NEWEST before and after: it fails,
// naming NEWEST, if no segment starts at or past the record it holds, the
// newest segment deleted whole), removes leftover temporary files
// (snapshots, a segment a repair was rewriting, NEWEST's, cut short by a
// crash), and verifies snapshots from the newest down (every chunk
// checksum, the payload's checksum and length): the first valid one is
// the base. It
// then reads only the segments from the one holding the block after the
// snapshot to the last, checking every record's checksum and that heights
// run on without a gap from segment to segment. Recovery therefore reads
// one snapshot and the log written since it (at most RetainSnapshots
// snapshot intervals if the newest snapshot is damaged), however old the
// chain. Without a valid snapshot the log must begin at its first segment
// (a header flag marks the segment that starts a log). With
// Options.KeepRecords = K, Open instead starts from the newest valid
// snapshot at least K blocks below the last height, if every record after
// it is there and valid (see Rollback).
//
// Last, Open fsyncs every segment it keeps, the directory and its parent.
// What it recovered may exist only in the page cache: a writer killed
// between a write and its fsync (or one whose fsync failed, then closed
// and reopened) leaves records, a new segment's name, a snapshot's rename
// or the directory's own entry that no fsync covered. The next blocks are
// written after them, and a segment rotation syncs only a segment this Log
// wrote to; without these fsyncs a power loss later could take
// acknowledged blocks with them, or leave the log a gap that no Open gets
// past.
//
// With Options.ReadOnly, Open does all of this and writes nothing: no
// lock, no removal of temporary snapshots, no fsync, no cut of a torn tail
// (the log's state ends before it all the same, and Recovery().Cut says
// so with Left set); the Log refuses every write with ErrReadOnly. It
// holds open the segments and snapshot it reads until its first Replay
// returns, or Close (up to 16 files; not on Windows), so that a writer
// beside it can remove them meanwhile, and it fails with ErrChanged if
// the writer rolls back meanwhile, or is rolling back as it begins
// (ROLLBACKS, below). The `timerlane
// inspect`, `verify` and `prove` commands open a directory so, beside a
// running node if need be.
//
// Damage is either a torn tail or corruption:
//
//   - Torn tail: in the last segment, bytes from some offset to the end that
//     hold no whole record, and no whole valid record after them, or,
//     before the next valid record, a whole 512-byte sector of zeros (a page
//     lost while the OS had written back a later one; under SyncNone or
//     SyncInterval no sync had covered those blocks). A crash during a
//     write leaves exactly that. A valid frame inside the extent that the
//     broken record's length claims does not count: a body may hold bytes
//     that frame a record (a payload is the user's), unless the length
//     alone is damaged (the bytes up to the frame checksum as the broken
//     record) or the header is not that record's (a wrong kind or height:
//     garbage, whose length means nothing). Repair skips such frames too
//     when it restarts a segment after damage. Open truncates the segment
//     there (or removes it, if even its header is incomplete: shorter than
//     a header and its magic as far as it goes, or zeros, in a segment
//     NEWEST does not name yet; the header is fsynced before any record
//     and before NEWEST names the segment, so anything else is damage),
//     logs "wal: torn tail: cut SEGMENT at offset N (M bytes)" through
//     Options.Logf and reports it in Recovery().Cut. Never below the snapshot recovery starts from:
//     WriteSnapshot syncs the log before it writes, so no crash leaves the
//     records up to a snapshot's height unsynced, and a last segment
//     broken below it is corruption (a truncated copy, a lost page of
//     synced data), which cutting would turn into the silent loss of every
//     record after the snapshot. A segment cut exactly at a record
//     boundary shows no broken record, and is not told apart from a crash
//     in Truncate; the newest segment removed whole is (NEWEST), and an
//     older one leaves a gap.
//   - Corruption: anything else, such as a flipped bit in a record that has
//     a valid record after it, a bad header, a missing segment or a height
//     gap. Open fails with a *CorruptError{Segment, Offset, Reason}
//     (errors.Is(err, ErrCorrupt)) naming the file and the offset of the
//     damaged record. Nothing is skipped: Repair (or Options.Repair, or the
//     `timerlane wal repair` command) truncates there, and removes the
//     segments after, only when a user asks; damage among records that the
//     newest valid snapshot covers (Open reads a segment from its start)
//     it cuts out instead, rewriting the segment from the next whole
//     record, which loses nothing the state needs.
//
// A damaged last record of the last segment is indistinguishable from a
// torn write and is cut as one; under SyncEveryBlock that record's block
// had been acknowledged, so a flipped bit there loses that one block
// (nothing else can). A last segment cut short from outside (a truncated
// copy, lost pages of synced data) above the newest snapshot is cut the
// same way, and loses every record after the cut, however many: nothing
// tells it from a torn write either. A damaged newest snapshot is skipped
// for an older one only if the log still covers the damaged one's height
// (RetainSnapshots, default 2, keeps the segments that fallback needs);
// otherwise Open fails with the snapshot's *CorruptError.
//
// # Rollback
//
// Truncate(h, snapshot) rolls the log back to block h (a reorg): it removes
// every record and snapshot above h, so that LastHeight is h and Append
// takes h+1; Truncate(0, nil) empties the log. The state at h must stay
// recoverable: from a snapshot at or below h and the records after it, or
// from the log's records from its start. When the rollback goes below all
// of that, Truncate first writes a snapshot at h, whose payload the
// snapshot function writes (nil: it fails with ErrNeedSnapshot and changes
// nothing).
//
// Truncate first syncs what was appended, then, each step durable before
// the next: writes that snapshot (temporary file, fsync, rename, directory
// fsync); removes damaged snapshots above h; removes the snapshots above h
// and then the segments whose records are all above h, newest first, one
// removal and directory fsync at a time (directory changes may reach the
// disk in any order, and a segment left without the one before it is a
// gap); and cuts the segment holding block h+1 there, walking its record
// headers to find it, and fsyncs it. So a crash at any point after the
// first sync recovers the state after some block between h and the old
// last height: the old last block while the snapshots above h are there;
// after that, a block reached by a replay from a snapshot at or below h,
// which the caller can roll back again. Only if the records from h+1 on
// are not in the log at all
// (every segment starts above h+1, so that the new snapshot at h joins
// none of them) do the segments go before the snapshots above h, and a
// crash in between recovers a block above h from such a snapshot alone.
// Open reads only the snapshot it starts from and the segments after it:
// Truncate reads whole any older snapshot or segment it is about to rely
// on, or that a crash midway would make recovery read. A damaged segment
// kept last goes whole, first of all, and the state at h then comes from a
// snapshot at h, written if there is none; a damaged older snapshot, or
// damaged records after it, are not relied on; a damaged segment above h
// goes first, and every segment above h before the snapshots above h.
//
// A caller that must roll back up to K blocks after a restart too sets
// Options.KeepRecords = K. Open then replays at least K records when the
// log has them, from which the caller rebuilds what it needs to undo the
// last K blocks; and WriteSnapshot keeps the snapshot that Open would start
// from now (the newest at least K below the newest snapshot; while there is
// none, the log's start, replayed from the empty state), every newer one
// (each becomes it in turn as the log grows), and the segments from it on,
// besides what RetainSnapshots keeps. With a snapshot every N blocks,
// recovery replays between K and about K+N records, and a Truncate back
// up to K blocks needs no snapshot function once there is a snapshot K or
// more blocks below the newest one (the newest at K+N or above).
//
// # Files
//
// A log directory holds:
//
//	NNNNNNNNNNNNNNNNNNNN.wal        segment; N = height of its first record, 20 digits
//	NNNNNNNNNNNNNNNNNNNN.snap       snapshot of the state after block N
//	NNNNNNNNNNNNNNNNNNNN.snap.tmp   snapshot being written (removed by Open)
//	NNNNNNNNNNNNNNNNNNNN.wal.tmp    segment Repair is rewriting (removed by Open)
//	NAME.corrupt                    a damaged snapshot set aside by Repair
//	NEWEST                          the first record of the newest segment begun (below)
//	NEWEST.tmp                      NEWEST being written (removed by Open)
//	ROLLBACKS                       a seqlock count of the log's rollbacks, for readers (below)
//	ROLLBACKS.tmp                   ROLLBACKS being written (removed by Open)
//	LOCK                            locked by the open Log, with the directory (holds nothing)
//
// All integers are little-endian; every checksum is xxh3-64
// (github.com/zeebo/xxh3).
//
// Segment: a 32-byte header, then records back to back.
//
//	header: magic "TLWAL\x00\x00\x01" [8] | first height u64 | flags u64 (1 = starts the log) | xxh3 of the 24 bytes before u64
//	record: length u32 | xxh3 u64 | kind u8 | height u64 | body [length-9]
//
// length counts kind, height and body; the checksum covers them (the same
// bytes). kind is 1 for a raw body, 2 for S2 (block format), 3 for zstd (one
// frame); the writer stores raw whatever compression would not shrink.
//
// Snapshot: a 32-byte header, chunks, an end frame, nothing after.
//
//	header: magic "TLSNAP\x00\x01" [8] | height u64 | codec u64 (a record kind) | xxh3 of the 24 bytes before u64
//	chunk:  xxh3 of the rest u64 | clen u32 | ulen u32 | data [clen]   (1 <= clen <= ulen <= 4 MiB; clen == ulen: stored raw)
//	end:    xxh3 of the rest u64 | 0 u32 | 0 u32 | payload length u64 | xxh3 of the payload u64
//
// The writer cuts the stream into 1 MiB chunks.
//
// NEWEST: 24 bytes, written to NEWEST.tmp, fsynced and renamed into place.
//
//	magic "TLNEWST\x01" [8] | first record u64 | xxh3 of the 16 bytes before u64
//
// It is raised after a rotation has made the new segment durable, and by
// Open to the newest segment it keeps; it is lowered, durably, before
// Truncate or Repair removes the newest segment. A segment it names has a
// durable header, so a torn-looking one there is damage, not a crash's
// (Open removes a torn header only above it). An emptied log holds none, and a
// log without it (written before it existed) has no bound until Open
// writes it. Open and Check report a bound that no segment reaches;
// Repair then rebuilds the file from the newest segment there is,
// accepting the loss.
//
// ROLLBACKS: 8 bytes, a count, written to ROLLBACKS.tmp and renamed into
// place, with no fsync (only readers beside the writer need it, and a
// crash ends them); a missing or short file counts 0. It is a seqlock: a Truncate
// makes it odd before it removes or cuts a file and even once it is done,
// and a writer's Open (so Repair too) makes an odd count (a Truncate that
// failed or crashed half way) even; until then readers fail. A read-only Log reads it as it begins and after
// it has read what it uses (Open, then Replay): an odd count, or another
// one, means a rollback ran or is running, which can rewrite records and
// a snapshot with no name or size changing, and the read is ErrChanged.
// Against a writer older than the file, which counts nothing, a read-only
// Log also compares its snapshot's last 16 bytes with those of the file
// now under its name, and the records Replay reads with those Open read.
//
// # Compression: S2
//
// Bodies are compressed with S2 (github.com/klauspost/compress/s2) by
// default, chosen by measurement on realistic bodies: blocks of 10,000
// changes, each a scheduled timer (kind, 32-byte random id, 20-byte owner
// from 10,000 actors, target height, sequence number, handler and payload
// lengths, empty payload; 75 bytes raw) or, in the mix, 60% schedules and
// 20% each of cancels and fires (kind and id; 58.2 bytes raw on average).
// BenchmarkCodec, medians of 3 on the 2-core benchmark VM:
//
//	                 schedules only           mix
//	                 B/change  ms/block       B/change  ms/block
//	s2               59.64     1.37           49.24     1.02
//	s2 better        56.19     4.82           46.32     3.29
//	zstd fastest     54.35     5.77           46.47     3.91
//	zstd default     51.74     8.52           43.68     9.18
//
// The 32-byte ids are random (keccak) and make up most of each change, so
// no codec gets far: zstd at its fastest saves 6-9% of the bytes over S2
// at about 4 times the CPU (3.8-4.2). At the target of 1,000,000 changes per second a block of 10,000 has
// 10 ms for compression, write and fsync (about 0.7 ms on this VM's disk):
// S2 spends 1-1.4 ms of it, zstd 4-6 ms, leaving little headroom on a busy
// 2-core machine. Measured end to end (BenchmarkAppend, fsync per block):
// S2 sustains 3.6 million changes/s on schedules and 4.5 million on the
// mix, zstd 1.4 and 1.5 million. S2 it is; Options.Compression can pick
// zstd for a log that prefers bytes to CPU, and every log reads both.
//
// Compressed bytes per scheduled timer with an empty payload: 59.65 on disk
// with S2 (record framing included), 54.34 with zstd.
package wal
