package sqlite

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A long journal does not pile up in the page cache.
//
// A journal is written once, in order, and read soon after by a stream
// following its turn, or much later (if ever) by a replay. Left to the
// kernel, every byte of it stays cached until memory runs short: a turn
// with a 128 MiB answer adds 128 MiB of cache, and the next one 128 MiB
// more. That memory is not free to take. On a virtual machine a page the
// guest has not touched lately costs a fault in the host to hand over:
// writing 128 MiB into fresh cache took 280 – 530 ms of CPU on the
// benchmark machine, into pages just given back 50 – 60 ms, and the
// SQLite store's writes were a quarter of the gateway's CPU on a flood
// of 64 KiB chunks.
//
// So once a journal passes settleWindow, its bytes are sent to the disk
// window by window as they are written, and dropped from the cache as
// soon as a stream has read them, or once they are settleLag behind the
// journal's end if no stream has; when its turn ends, the rest is dropped
// once it is on disk. A long turn keeps at most about settleLag of cache
// while it runs, and writes into pages it or a turn before it has just
// given back. A second stream reading the same bytes, one more than
// settleLag behind, or a replay reads them from the disk. Short journals
// (most turns) never reach settleWindow and are left alone: the cache
// they take is small, and a call per commit would cost more than it
// saves.
//
// This changes what is cached and when bytes start for the disk, not what
// is committed: a journal's bytes are as durable as before (see Store).
const (
	settleWindow = 4 << 20
	settleLag    = 64 << 20
)

// settle starts for the disk, and drops from the cache, what a write that
// took a turn's data file from from to to bytes brought past the windows'
// bounds; when the write ends the turn, the settler drops the rest. It
// runs after the write's transaction has committed, so that waiting for
// the disk holds back only that turn's journal, never the store's writer.
//
// It is a hint to the kernel: a failure leaves bytes cached that could
// have been dropped, and loses nothing. A write-back error that matters
// (a failing disk) is the kernel's to report to the writes themselves.
func (f *journalFiles) settle(turnID string, from, to uint64, ends bool) {
	if ends && to >= settleWindow {
		f.settler.add(turnID)
	}
	start, end := alignDown(from, settleWindow), alignDown(to, settleWindow)
	if end > start {
		f.withData(turnID, func(fd int) { settleWindows(fd, start, end) })
	}
}

// settleWindows starts the windows from start to end for the disk, and
// drops those settleLag behind them.
func settleWindows(fd int, start, end uint64) {
	// The windows this write completed start on their way to the disk;
	// the kernel writes them while the turn goes on, and a stream that
	// reads them then finds them clean: only clean pages can be dropped.
	_ = unix.SyncFileRange(fd, int64(start), int64(end-start), unix.SYNC_FILE_RANGE_WRITE)
	if end <= settleLag {
		return
	}
	// The windows settleLag behind them were started many writes ago:
	// wait for any still on the way, then drop them.
	dropFrom, dropTo := uint64(0), end-settleLag
	if start > settleLag {
		dropFrom = start - settleLag
	}
	if unix.SyncFileRange(fd, int64(dropFrom), int64(dropTo-dropFrom), waitForDisk) == nil {
		_ = unix.Fadvise(fd, int64(dropFrom), int64(dropTo-dropFrom), unix.FADV_DONTNEED)
	}
}

// withData calls do with a descriptor of a turn's data file, unless it
// cannot be opened (a journal deleted meanwhile is no error: a hint about
// it has nothing left to do).
func (f *journalFiles) withData(turnID string, do func(fd int)) {
	dataPath, _ := f.paths(turnID)
	file, err := os.Open(dataPath)
	if err != nil {
		return
	}
	defer file.Close()
	do(int(file.Fd()))
}

// dropRead drops from the cache the n bytes at off of a journal's data
// file, which a stream has just read: the pages among them not on disk
// yet stay (the kernel drops only clean pages), for settle to drop later.
func dropRead(file *os.File, off int64, n int) {
	_ = unix.Fadvise(int(file.Fd()), off, int64(n), unix.FADV_DONTNEED)
}

// settleQueue bounds the ended journals waiting for the settler; past it
// a journal stays cached, which loses nothing.
const settleQueue = 64

// settler drops the long journals of ended turns from the cache once they
// are on disk. No write follows a turn's last to drop its last settleLag,
// and the terminal of a long answer, just written, is as long as its
// chunks. Waiting for the disk is the settler's own, so that no turn's
// terminal waits for it. It is the store's, and ends with it.
type settler struct {
	files     *journalFiles
	queue     chan string // ids of ended turns
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (s *settler) start(files *journalFiles) {
	s.files = files
	s.queue = make(chan string, settleQueue)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	go s.run()
}

// add queues an ended turn's journal, unless the queue is full.
func (s *settler) add(turnID string) {
	select {
	case s.queue <- turnID:
	default:
	}
}

func (s *settler) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return // what is queued stays cached
		case id := <-s.queue:
			s.settleEnded(id)
		}
	}
}

// close stops the settler and waits for it: at most one window's wait for
// the disk, so that closing the store (the last step of a shutdown) is
// not held for a long journal on a slow disk.
func (s *settler) close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
	})
}

// settleEnded waits for an ended turn's journal to be on disk and drops it
// from the cache, window by window, until the settler is stopped.
func (s *settler) settleEnded(turnID string) {
	s.files.withData(turnID, func(fd int) {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			return
		}
		for off := int64(0); off < st.Size; off += settleWindow {
			select {
			case <-s.stop:
				return
			default:
			}
			n := min(settleWindow, st.Size-off)
			if unix.SyncFileRange(fd, off, n, waitForDisk) != nil {
				return
			}
			_ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
		}
	})
}

// close stops what the journal files run behind the store.
func (f *journalFiles) close() { f.settler.close() }

// waitForDisk makes sync_file_range(2) start what is not on its way to
// the disk yet and wait for all of it: only clean pages can be dropped.
const waitForDisk = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER

// alignDown is n rounded down to a multiple of align.
func alignDown(n, align uint64) uint64 { return n - n%align }
