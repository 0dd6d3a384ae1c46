package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
	dir string
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
	return &journalFiles{dir: dir}, nil
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

// write writes events to a turn's files after the first count events,
// which end at byte size of the data file, and returns the data file's
// new committed size once the caller commits. count 0 starts the journal
// afresh (a file left by an earlier turn of the same id is overwritten).
func (f *journalFiles) write(turnID string, count, size uint64, events []Event) (uint64, error) {
	dataPath, indexPath := f.paths(turnID)
	flags := os.O_WRONLY | os.O_CREATE
	if count == 0 {
		flags |= os.O_TRUNC
	}
	index := make([]byte, 0, indexEntry*len(events))
	end := size
	bufs := make([][]byte, 0, len(events))
	for _, e := range events {
		n := len(bufs)
		bufs = appendStored(bufs, e)
		for _, b := range bufs[n:] {
			end += uint64(len(b))
		}
		index = binary.LittleEndian.AppendUint64(index, end)
	}
	if err := pwriteFile(dataPath, flags, bufs, int64(size)); err != nil {
		return 0, err
	}
	if err := pwriteFile(indexPath, flags, [][]byte{index}, int64(indexEntry*count)); err != nil {
		return 0, err
	}
	return end, nil
}

// pwriteFile writes bufs at off in the file at path.
func pwriteFile(path string, flags int, bufs [][]byte, off int64) error {
	file, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	fd := int(file.Fd())
	for len(bufs) > 0 {
		// Past IOV_MAX buffers a call is refused; past the first
		// buffer a short write resumes where it stopped.
		n, err := unix.Pwritev(fd, bufs[:min(len(bufs), 1024)], off)
		if err != nil {
			file.Close()
			return &os.PathError{Op: "write", Path: path, Err: err}
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
	return file.Close()
}

// read returns the events with seq after+1 to after+n of a turn whose
// committed files end at byte size, fewer when maxBytes is positive and
// they would pass it (never fewer than one). The events share one buffer,
// and one kept without its repeated bytes comes in pieces of it.
func (f *journalFiles) read(turnID string, after, n, size uint64, maxBytes int) ([]Event, error) {
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
	if err := preadFile(indexPath, index, int64(indexEntry*from)); err != nil {
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
			return nil, fmt.Errorf("%s is damaged: event %d ends at byte %d, after %d (the journal has %d bytes)", indexPath, after+uint64(i), ends[i], ends[i-1], size)
		}
		if i > 1 && maxBytes > 0 && ends[i]-ends[0] > uint64(maxBytes) {
			ends, n = ends[:i], uint64(i-1)
			break
		}
	}
	start, end := ends[0], ends[len(ends)-1]
	data := make([]byte, end-start)
	if err := preadFile(dataPath, data, int64(start)); err != nil {
		return nil, err
	}
	events := make([]Event, n)
	for i := range events {
		b := data[ends[i]-start : ends[i+1]-start]
		seq := after + 1 + uint64(i)
		e, err := expandStored(seq, b[:len(b):len(b)])
		if err != nil {
			return nil, fmt.Errorf("%s is damaged: event %d: %w", dataPath, seq, err)
		}
		events[i] = e
	}
	return events, nil
}

// preadFile fills buf from the file at path at off. A file shorter than
// its record says is damaged (a power loss can leave one so): that is an
// error, never a short journal passed off as whole.
func preadFile(path string, buf []byte, off int64) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := file.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is shorter than its record says (damaged): %w", path, io.ErrUnexpectedEOF)
		}
		return err
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
