package sqlite

import (
	"encoding/binary"
	"errors"

	"github.com/acpgate/acpgate/internal/store"
)

// How the journal files keep an event: its encoding as it is, or, for an
// event with an Echo worth dropping, a header and the encoding without the
// repeated bytes:
//
//	0x00  uvarint(From)  uvarint(At)  uvarint(Len)  encoding[:At]  encoding[At+Len:]
//
// The leading zero byte tells the two apart: an encoded PromptEvent never
// starts with it (it would be the tag of field 0, which protobuf forbids),
// so the files an earlier acpgate wrote read as they are. An event given to
// the store that does start with it (the store takes any bytes) is kept
// with a header too, one whose Len is 0.
const storedHeader = 0x00

// minEcho is the shortest repeat worth a header and a copy on every read
// of the event from the files: below it the bytes saved are noise beside
// the write's own cost.
const minEcho = 64

// maxStoredHeader is the longest header appendStored writes.
const maxStoredHeader = 1 + 3*binary.MaxVarintLen64

// appendStored appends how the files keep e: its header, if it has one,
// to head, and the pieces to write after it to bufs. The pieces alias e's,
// which are written and never kept.
func appendStored(head []byte, bufs [][]byte, e store.Event) ([]byte, [][]byte) {
	echo := e.Echo
	if echo.Len < minEcho || !echo.Valid(e.Len()) {
		echo = store.Echo{}
	}
	if echo.Len == 0 && (len(e.Data) == 0 || e.Data[0] != storedHeader) {
		return head, e.AppendPieces(bufs)
	}
	head = append(head, storedHeader)
	head = binary.AppendUvarint(head, uint64(echo.From))
	head = binary.AppendUvarint(head, uint64(echo.At))
	head = binary.AppendUvarint(head, uint64(echo.Len))
	// The pieces, with the bytes [At, At+Len) of their concatenation left
	// out.
	bufs = appendOutside(bufs, e.Data, 0, echo)
	off := len(e.Data)
	for _, p := range e.More {
		bufs = appendOutside(bufs, p, off, echo)
		off += len(p)
	}
	return head, bufs
}

// appendOutside appends to bufs what of p, which starts at offset off of
// an encoding, lies outside the repeat echo.
func appendOutside(bufs [][]byte, p []byte, off int, echo store.Echo) [][]byte {
	start, end, skipFrom, skipTo := off, off+len(p), echo.At, echo.At+echo.Len
	if len(p) == 0 {
		return bufs
	}
	if end <= skipFrom || start >= skipTo {
		return append(bufs, p)
	}
	if start < skipFrom {
		bufs = append(bufs, p[:skipFrom-start])
	}
	if end > skipTo {
		bufs = append(bufs, p[skipTo-start:])
	}
	return bufs
}

var errStored = errors.New("its header does not fit its bytes")

// expandStored returns the event the files keep in b: b itself, or, for
// an event kept with a header, the whole encoding in pieces that alias b
// (the repeated bytes come before the place they repeat at, so they are in
// b already): reading a journal back copies nothing more than the read.
func expandStored(seq uint64, b []byte) (store.Event, error) {
	if len(b) == 0 || b[0] != storedHeader {
		return store.Event{Seq: seq, Data: b}, nil
	}
	rest := b[1:]
	var fields [3]uint64
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return store.Event{}, errStored
		}
		fields[i], rest = v, rest[n:]
	}
	from, at, n := fields[0], fields[1], fields[2]
	if at > uint64(len(rest)) || from > at || n > at-from {
		return store.Event{}, errStored
	}
	e := store.Event{Seq: seq, Data: rest[:at:at]}
	if n > 0 {
		e.More = append(e.More, rest[from:from+n:from+n])
	}
	if at < uint64(len(rest)) {
		e.More = append(e.More, rest[at:])
	}
	return e, nil
}
