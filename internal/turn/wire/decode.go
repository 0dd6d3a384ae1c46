package wire

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// DecodeForAudit decodes an encoded event, given in pieces, except that a
// completed turn's outcome decodes empty: the audit needs to know only
// that it is there, and the outcome repeats the turn's answer, twice for a
// one-message turn. Decoding it whole copied both strings out of the
// encoding: 312 MiB more at the end of a 156 MiB answer, live beside the
// encoding being sent. nil when the bytes do not decode.
func DecodeForAudit(pieces [][]byte) *acpgatev1.PromptEvent {
	r := pieceReader{pieces: pieces}
	var rest []byte
	completed := false
	for !r.empty() {
		// A field's tag and, for a length-delimited one, its length
		// come first, each at most a varint's size.
		head := r.peek(2 * binary.MaxVarintLen64)
		num, typ, n := protowire.ConsumeTag(head)
		if n < 0 {
			return nil
		}
		m := protowire.ConsumeFieldValue(num, typ, head[n:])
		if typ == protowire.BytesType {
			size, sizeLen := protowire.ConsumeVarint(head[n:])
			if sizeLen < 0 || uint64(n+sizeLen)+size > uint64(r.len()) {
				return nil
			}
			m = sizeLen + int(size)
		}
		if m < 0 {
			return nil
		}
		if num == outcomeField && typ == protowire.BytesType {
			completed = true
			r.next(n+m, nil)
		} else {
			r.next(n+m, func(b []byte) { rest = append(rest, b...) })
		}
	}
	e := &acpgatev1.PromptEvent{}
	if proto.Unmarshal(rest, e) != nil {
		return nil
	}
	if completed {
		e.Event = &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{}}
	}
	return e
}

// pieceReader reads an encoding given in pieces from the front.
type pieceReader struct {
	pieces [][]byte
}

func (r *pieceReader) empty() bool { return r.len() == 0 }

func (r *pieceReader) len() int {
	n := 0
	for _, p := range r.pieces {
		n += len(p)
	}
	return n
}

// peek returns up to n bytes from the front: the first piece's own bytes
// when it holds them, else a copy across pieces.
func (r *pieceReader) peek(n int) []byte {
	if len(r.pieces) == 0 || len(r.pieces[0]) >= n {
		if len(r.pieces) == 0 {
			return nil
		}
		return r.pieces[0][:n]
	}
	var out []byte
	for _, p := range r.pieces {
		out = append(out, p[:min(len(p), n-len(out))]...)
		if len(out) == n {
			break
		}
	}
	return out
}

// next consumes n bytes from the front, handing them to keep, piece by
// piece, unless keep is nil. The caller has checked that there are n.
func (r *pieceReader) next(n int, keep func([]byte)) {
	for n > 0 {
		k := min(n, len(r.pieces[0]))
		if keep != nil {
			keep(r.pieces[0][:k])
		}
		r.pieces[0] = r.pieces[0][k:]
		if len(r.pieces[0]) == 0 {
			r.pieces = r.pieces[1:]
		}
		n -= k
	}
}
