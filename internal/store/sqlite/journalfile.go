package sqlite

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/acpgate/acpgate/internal/store"
)

// journalFiles keeps the SQLite store's journals: for each turn, the
// events' bytes back to back in an append-only data file, and an index file
// with the end offset of each event (8 bytes, little-endian), so that the
// event with seq s ends at index entry s-1 and starts where s-1 ends.
//
// Why files and not rows: a journal is written once, in order, and read in
// order; a B-tree row per event costs several microseconds of SQLite for a
// 64-byte chunk, and large events go through SQLite's write-ahead log and
// then again into the database file. An append to a file is one pwritev of
// the bytes as they are. SQLite keeps what must be atomic: the turn's
// record, with how many events and bytes of its files are committed.
// Bytes past that (a write whose transaction failed, or that a crash cut
// short) are not part of the journal: readers never look past the
// committed length, and the next append overwrites them.
type journalFiles struct {
	dir     string
	scratch sync.Pool // of *scratch
	settler settler
}

// journalsDir is the directory inside the store's dir that holds them.
const journalsDir = "journals"

const (
	dataSuffix  = ".events"
	indexSuffix = ".index"
	indexEntry  = 8
)

func newJournalFiles(storeDir string) (*journalFiles, error) {
	dir := filepath.Join(storeDir, journalsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the journal directory %s: %w", dir, err)
	}
	f := &journalFiles{dir: dir}
	f.settler.start(f)
	return f, nil
}

// name is the files' common name for a turn: a hash of its id, since an id
// is any string and a file name is not.
func (f *journalFiles) name(turnID string) string {
	sum := sha256.Sum256([]byte(turnID))
	return hex.EncodeToString(sum[:16])
}

func (f *journalFiles) paths(turnID string) (data, index string) {
	base := filepath.Join(f.dir, f.name(turnID))
	return base + dataSuffix, base + indexSuffix
}

// gatherMax is the size below which an event is copied into one buffer
// with its neighbours and written from there: a batch of small events is
// then one buffer for the kernel, not up to three an event (a header and
// the pieces either side of a repeat), and listing the buffers allocates
// nothing an event. Longer events are written from their own memory,
// where a copy would cost more than the buffers it saves.
const gatherMax = 4 << 10

// keepScratch is the largest gathering buffer kept for the next write: a
// rare large batch does not pin its buffer.
const keepScratch = 1 << 20

// scratch is a write's working memory, reused from write to write.
type scratch struct {
	gather, index []byte
	bufs, pieces  [][]byte
}

// journalWriter is a turn's two journal files, open for writing. The
// SQLite store keeps a running turn's open from one commit to the next
// (see runningJournals): opening and closing both files was a third of
// the cost of committing a small batch.
type journalWriter struct {
	data, index *os.File
}

// open opens a turn's files for writing; fresh starts the journal afresh
// (a file left by an earlier turn of the same id is emptied).
func (f *journalFiles) open(turnID string, fresh bool) (*journalWriter, error) {
	dataPath, indexPath := f.paths(turnID)
	flags := os.O_WRONLY | os.O_CREATE
	if fresh {
		flags |= os.O_TRUNC
	}
	data, err := os.OpenFile(dataPath, flags, 0o600)
	if err != nil {
		return nil, err
	}
	index, err := os.OpenFile(indexPath, flags, 0o600)
	if err != nil {
		data.Close()
		return nil, err
	}
	return &journalWriter{data: data, index: index}, nil
}

// close closes both files.
func (w *journalWriter) close() error {
	return errors.Join(w.data.Close(), w.index.Close())
}

// write writes events to a turn's files after the first count events,
// which end at byte size of the data file, and returns the data file's
// new committed size once the caller commits. count 0 starts the journal
// afresh (a file left by an earlier turn of the same id is overwritten).
func (f *journalFiles) write(turnID string, count, size uint64, events batch) (uint64, error) {
	w, err := f.open(turnID, count == 0)
	if err != nil {
		return 0, err
	}
	end, err := f.writeTo(w, count, size, events)
	if cerr := w.close(); err == nil && cerr != nil {
		return 0, cerr
	}
	return end, err
}

// writeTo is write to files already open.
func (f *journalFiles) writeTo(jw *journalWriter, count, size uint64, events batch) (uint64, error) {
	w, _ := f.scratch.Get().(*scratch)
	if w == nil {
		w = new(scratch)
	}
	defer f.release(w)
	// The gathered bytes never outgrow what is reserved here, so the
	// buffers taken from them stay valid.
	reserve := 0
	for e := range events.all() {
		reserve += maxStoredHeader
		if n := e.Len(); n < gatherMax {
			reserve += n
		}
	}
	w.gather = slices.Grow(w.gather[:0], reserve)
	w.index = slices.Grow(w.index[:0], indexEntry*events.len())
	end, mark := size, 0 // mark: the gathered bytes before it are in w.bufs
	for e := range events.all() {
		before := len(w.gather)
		w.gather, w.pieces = appendStored(w.gather, w.pieces[:0], e)
		end += uint64(len(w.gather) - before)
		if e.Len() < gatherMax {
			for _, p := range w.pieces {
				w.gather = append(w.gather, p...)
				end += uint64(len(p))
			}
		} else {
			if len(w.gather) > mark {
				w.bufs = append(w.bufs, w.gather[mark:])
			}
			mark = len(w.gather)
			for _, p := range w.pieces {
				w.bufs = append(w.bufs, p)
				end += uint64(len(p))
			}
		}
		w.index = binary.LittleEndian.AppendUint64(w.index, end)
	}
	if len(w.gather) > mark {
		w.bufs = append(w.bufs, w.gather[mark:])
	}
	if err := pwriteAll(jw.data, w.bufs, int64(size)); err != nil {
		return 0, err
	}
	w.bufs = append(w.bufs[:0], w.index)
	if err := pwriteAll(jw.index, w.bufs, int64(indexEntry*count)); err != nil {
		return 0, err
	}
	return end, nil
}

// release keeps w for the next write, holding none of the events' memory.
func (f *journalFiles) release(w *scratch) {
	clear(w.bufs[:cap(w.bufs)])
	clear(w.pieces[:cap(w.pieces)])
	w.bufs, w.pieces = w.bufs[:0], w.pieces[:0]
	if cap(w.gather) > keepScratch {
		w.gather = nil
	}
	f.scratch.Put(w)
}

// pwriteAll writes bufs at off in file.
func pwriteAll(file *os.File, bufs [][]byte, off int64) error {
	fd := int(file.Fd())
	for len(bufs) > 0 {
		// Past IOV_MAX buffers a call is refused; past the first
		// buffer a short write resumes where it stopped.
		n, err := unix.Pwritev(fd, bufs[:min(len(bufs), 1024)], off)
		if err != nil {
			return &os.PathError{Op: "write", Path: file.Name(), Err: err}
		}
		off += int64(n)
		for n > 0 {
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
	}
	return nil
}

// read returns the events with seq after+1 to after+n of a turn whose
// committed files end at byte size, fewer when maxBytes is positive and
// they would pass it (never fewer than one). The events share one buffer,
// and one kept without its repeated bytes comes in pieces of it.
func (f *journalFiles) read(turnID string, after, n, size uint64, maxBytes int) ([]store.Event, error) {
	if n == 0 {
		return nil, nil
	}
	dataPath, indexPath := f.paths(turnID)
	// The entries of seqs after..after+n: the first is where seq after+1
	// starts (0 for seq 1).
	from := after
	if after > 0 {
		from = after - 1
	}
	index := make([]byte, indexEntry*(after+n-from))
	if err := preadFile(indexPath, index, int64(indexEntry*from), false); err != nil {
		return nil, err
	}
	ends := make([]uint64, 0, n+1)
	if after == 0 {
		ends = append(ends, 0)
	}
	for i := 0; i < len(index); i += indexEntry {
		ends = append(ends, binary.LittleEndian.Uint64(index[i:]))
	}
	for i := 1; i < len(ends); i++ {
		if ends[i] < ends[i-1] || ends[i] > size {
			return nil, damaged("%s is damaged: event %d ends at byte %d, after %d (the journal has %d bytes)", indexPath, after+uint64(i), ends[i], ends[i-1], size)
		}
		if i > 1 && maxBytes > 0 && ends[i]-ends[0] > uint64(maxBytes) {
			ends, n = ends[:i], uint64(i-1)
			break
		}
	}
	start, end := ends[0], ends[len(ends)-1]
	data := make([]byte, end-start)
	if err := preadFile(dataPath, data, int64(start), size >= settleWindow); err != nil {
		return nil, err
	}
	events := make([]store.Event, n)
	for i := range events {
		b := data[ends[i]-start : ends[i+1]-start]
		seq := after + 1 + uint64(i)
		e, err := expandStored(seq, b[:len(b):len(b)])
		if err != nil {
			return nil, damaged("%s is damaged: event %d: %w", dataPath, seq, err)
		}
		events[i] = e
	}
	return events, nil
}

// preadFile fills buf from the file at path at off, and with uncache
// drops what it read from the page cache (see settle). A file shorter
// than its record says is damaged (a power loss can leave one so): that
// is an error, never a short journal passed off as whole.
func preadFile(path string, buf []byte, off int64, uncache bool) error {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return damaged("%s is missing, though its turn's record says it holds events (damaged): %w", path, err)
	}
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := file.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return damaged("%s is shorter than its record says (damaged): %w", path, io.ErrUnexpectedEOF)
		}
		return err
	}
	if uncache {
		dropRead(file, off, len(buf))
	}
	return nil
}

// remove deletes a turn's files; files already gone are no error.
func (f *journalFiles) remove(turnID string) error {
	var errs []error
	dataPath, indexPath := f.paths(turnID)
	for _, p := range []string{dataPath, indexPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// whole reports whether a turn's files are there, the data at least size
// bytes long (what its record says is committed).
func (f *journalFiles) whole(turnID string, size int64) bool {
	dataPath, indexPath := f.paths(turnID)
	data, err := os.Stat(dataPath)
	if err != nil || data.Size() < size {
		return false
	}
	_, err = os.Stat(indexPath)
	return err == nil
}

// sweep deletes the files of turns that keep does not name: files of turns
// whose deletion was committed but whose files a crash kept.
func (f *journalFiles) sweep(keep func(name string) bool) error {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name, _, ok := strings.Cut(e.Name(), ".")
		if !ok || keep(name) {
			continue
		}
		if err := os.Remove(filepath.Join(f.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// batch is events in seq order in consecutive slices: an ending's events,
// the journal's unwritten tail and then the terminal, are written without
// first copying the tail into a slice with room for the terminal.
type batch [][]store.Event

// len is the number of events.
func (b batch) len() int {
	n := 0
	for _, s := range b {
		n += len(s)
	}
	return n
}

// all yields the events in order.
func (b batch) all() iter.Seq[store.Event] {
	return func(yield func(store.Event) bool) {
		for _, s := range b {
			for _, e := range s {
				if !yield(e) {
					return
				}
			}
		}
	}
}
