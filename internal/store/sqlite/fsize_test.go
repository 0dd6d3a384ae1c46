package sqlite_test

import (
	"bytes"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/acpgate/acpgate/internal/store"
)

// limitFileSize sets this process's RLIMIT_FSIZE: writes past max bytes in
// any file fail with EFBIG (Go ignores the SIGXFSZ that comes with them).
func limitFileSize(max uint64) error {
	return unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: max, Max: max})
}

func equalEvents(a, b []store.Event) bool {
	return slices.EqualFunc(a, b, func(x, y store.Event) bool { return x.Seq == y.Seq && bytes.Equal(x.Data, y.Data) })
}
