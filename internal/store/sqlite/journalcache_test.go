package sqlite_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"golang.org/x/sys/unix"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/sqlite"
	"github.com/acpgate/acpgate/internal/store/storetest"
)

// cachedPages reports, for each page of the file at path from off for n
// bytes, whether it is in the page cache.
func cachedPages(t *testing.T, path string, off, n int64) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	// x/sys/unix has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

func countCached(pages []bool) int {
	n := 0
	for _, c := range pages {
		if c {
			n++
		}
	}
	return n
}

// skipWithoutDisk skips a test of the page cache where the store's
// directory is a tmpfs: there the cache is the file, and nothing leaves it.
func skipWithoutDisk(t *testing.T, dir string) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is a tmpfs: its files are only in the page cache", dir)
	}
}

// bigEvents is n events of size bytes each from seq from, each distinct.
func bigEvents(from uint64, n, size int) []store.Event {
	events := make([]store.Event, n)
	for i := range events {
		events[i] = store.Event{Seq: from + uint64(i), Data: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
	}
	return events
}

// startLongTurn opens a SQLite store in a directory on a disk, with one
// running turn, "t1".
func startLongTurn(t *testing.T) *sqlite.Store {
	t.Helper()
	dir := t.TempDir()
	skipWithoutDisk(t, dir)
	s := openSQLite(t, dir)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatal(err)
	}
	return s
}

// longEventSize is the size of the events of longJournal.
const longEventSize = 256 << 10

// longJournal appends events of longEventSize after the started event of
// startLongTurn's turn, total bytes of them, in batches of 2 MiB as a
// turn's commits; it returns them and the journal's data file.
func longJournal(t *testing.T, s *sqlite.Store, total int64) ([]store.Event, string) {
	t.Helper()
	n := int(total / longEventSize)
	events := bigEvents(2, n, longEventSize)
	for i := 0; i < n; i += 8 {
		if err := s.Append(context.Background(), "t1", events[i:min(i+8, n)]); err != nil {
			t.Fatal(err)
		}
	}
	return events, s.JournalDataPath("t1")
}

func TestALongJournalLeavesThePageCacheOnceFarBehindItsEndAndReadsBackWhole(t *testing.T) {
	s := startLongTurn(t)
	ctx := context.Background()
	events, path := longJournal(t, s, sqlite.SettleLag+3*sqlite.SettleWindow)
	// The first window is settleLag and more behind the end: written
	// back and dropped.
	if c := countCached(cachedPages(t, path, 0, sqlite.SettleWindow)); c != 0 {
		t.Errorf("%d pages of the journal's first %d bytes are still cached, want 0", c, sqlite.SettleWindow)
	}
	// The last settleLag are what a stream close behind reads: kept.
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	tailAt := (st.Size() - sqlite.SettleWindow) / page * page
	tail := cachedPages(t, path, tailAt, st.Size()-tailAt)
	if c := countCached(tail); c != len(tail) {
		t.Errorf("%d of the last %d pages are cached, want all", c, len(tail))
	}
	// What left the cache reads back from the disk as it was written.
	got, err := s.Events(ctx, "t1", 1, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if !bytes.Equal(e.Flat(), events[i].Data) {
			t.Fatalf("event %d read back differs from what was written", e.Seq)
		}
	}
}

func TestWhatAStreamReadOfALongJournalLeavesThePageCache(t *testing.T) {
	s := startLongTurn(t)
	events, path := longJournal(t, s, 2*sqlite.SettleWindow)
	// Only clean pages can be dropped: write the journal back first, as
	// the kernel will have done by the time a stream reads a window.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if c := countCached(cachedPages(t, path, 0, sqlite.SettleWindow)); c == 0 {
		t.Fatal("no page of the journal is cached before it is read: the test shows nothing")
	}
	got, err := s.Events(context.Background(), "t1", 1, len(events)/2, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The read began inside the first page, after the started event:
	// only whole pages leave the cache.
	page := int64(os.Getpagesize())
	read := int64(len(got))*longEventSize - page
	if c := countCached(cachedPages(t, path, page, read)); c != 0 {
		t.Errorf("%d pages of the %d bytes a stream read are still cached, want 0", c, read)
	}
}

func TestAShortJournalIsLeftInThePageCache(t *testing.T) {
	s := startLongTurn(t)
	ctx := context.Background()
	const size = 64 << 10
	n := int(sqlite.SettleWindow/size) - 2
	if err := s.Append(ctx, "t1", bigEvents(2, n, size)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(ctx, "t1", 1, n, 0); err != nil {
		t.Fatal(err)
	}
	pages := cachedPages(t, s.JournalDataPath("t1"), 0, int64(n)*size)
	if c := countCached(pages); c != len(pages) {
		t.Errorf("%d of a short journal's %d pages are cached after writing and reading it, want all", c, len(pages))
	}
}

func TestAnEndedLongJournalLeavesThePageCacheOnceOnDisk(t *testing.T) {
	s := startLongTurn(t)
	ctx := context.Background()
	events, path := longJournal(t, s, 2*sqlite.SettleWindow)
	// Less than settleLag: nothing has left the cache while it ran.
	if c := countCached(cachedPages(t, path, 0, sqlite.SettleWindow)); c == 0 {
		t.Fatal("the running journal's first window is not cached: the test shows nothing")
	}
	terminal := bigEvents(uint64(len(events))+2, 1, sqlite.SettleWindow)[0]
	if err := s.End(ctx, "t1", nil, terminal, time.Now()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	whole := st.Size() / page * page
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := countCached(cachedPages(t, path, 0, whole))
		if c == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pages of the ended journal are still cached 10 s after its end, want 0", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And it reads back whole, the terminal last.
	got, err := s.Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Terminal, terminal.Data) {
		t.Fatal("the terminal read back differs from what was written")
	}
}

func TestClosingTheSQLiteStoreStopsWhatSettlesItsJournals(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := startLongTurn(t)
	ctx := context.Background()
	if err := s.End(ctx, "t1", bigEvents(2, 1, sqlite.SettleWindow), store.Event{Seq: 3, Data: []byte("ended")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAStoppedSettlerLeavesTheRestOfAJournalToTheKernel(t *testing.T) {
	s := startLongTurn(t)
	_, path := longJournal(t, s, 3*sqlite.SettleWindow)
	if c := countCached(cachedPages(t, path, 0, sqlite.SettleWindow)); c == 0 {
		t.Fatal("the journal's first window is not cached: the test shows nothing")
	}
	// Closing the store waits for the settler, so the settler must not
	// wait for the disk window after window once it is stopped.
	sqlite.SettleAfterClose(s, "t1")
	if c := countCached(cachedPages(t, path, 0, sqlite.SettleWindow)); c == 0 {
		t.Error("a stopped settler still wrote back and dropped the journal's first window")
	}
}
