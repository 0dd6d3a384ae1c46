package sqlite

import (
	"bytes"
	"slices"
	"testing"

	"github.com/acpgate/acpgate/internal/store"
)

// FuzzStored checks that an event kept by the journal files reads back as
// its whole encoding, wherever its repeat falls among its pieces, and that
// no bytes in the files, however damaged, make a read panic.
func FuzzStored(f *testing.F) {
	f.Add([]byte("head-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef-"), uint8(2), uint8(5), uint8(64), uint8(3))
	f.Add([]byte{0, 1, 2, 3}, uint8(0), uint8(0), uint8(0), uint8(1))
	f.Add(bytes.Repeat([]byte{0}, 200), uint8(0), uint8(64), uint8(64), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, from, at, n, cuts uint8) {
		// The encoding data+data[from:from+n], cut into pieces every cuts
		// bytes.
		e := store.Event{Seq: 1}
		enc := data
		if int(from)+int(n) <= len(data) {
			enc = slices.Concat(data, data[from:int(from)+int(n)])
			e.Echo = store.Echo{From: int(from), At: len(data), Len: int(n)}
		} else {
			e.Echo = store.Echo{From: int(from), At: int(at), Len: int(n)} // maybe not valid
		}
		step := max(1, int(cuts))
		for i := 0; i < len(enc); i += step {
			p := enc[i:min(len(enc), i+step)]
			if i == 0 {
				e.Data = p
			} else {
				e.More = append(e.More, p)
			}
		}
		head, pieces := appendStored(nil, nil, e)
		stored := slices.Concat(append([][]byte{head}, pieces...)...)
		ev, err := expandStored(1, stored)
		got := ev.Flat()
		if err != nil || !bytes.Equal(got, enc) {
			t.Fatalf("kept %x, read back %x, %v; want %x", stored, got, err, enc)
		}
		if e.Echo.Len >= minEcho && e.Echo.Valid(len(enc)) && len(stored) >= len(enc) {
			t.Errorf("an event with a %d-byte repeat was kept in %d bytes, its encoding is %d", e.Echo.Len, len(stored), len(enc))
		}
		// Whatever the files hold: an error or some bytes, never a panic.
		_, _ = expandStored(1, append([]byte{storedHeader}, data...))
	})
}

func TestADamagedHeaderIsAnErrorNotAnEvent(t *testing.T) {
	for _, b := range [][]byte{
		{storedHeader},                      // no fields
		{storedHeader, 0x80},                // a varint cut short
		{storedHeader, 0, 10, 5, 'a', 'b'},  // the repeat's place past the bytes
		{storedHeader, 3, 2, 1, 'a', 'b'},   // a repeat of bytes after it
		{storedHeader, 0, 2, 3, 'a', 'b'},   // a repeat longer than what precedes it
		{storedHeader, 0, 1, 0xff, 0xff, 1}, // an absurd length
	} {
		if got, err := expandStored(1, b); err == nil {
			t.Errorf("expandStored(%x) = %x, want an error", b, got.Flat())
		}
	}
}
