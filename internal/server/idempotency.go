package server

import (
	"bytes"
	"crypto/sha256"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
)

// The rules of PromptRequest.request_id and on_disconnect, in one place.

// maxRequestIDBytes bounds PromptRequest.request_id.
const maxRequestIDBytes = 128

// checkRequestID enforces request_id's form: 1 to 128 bytes of printable
// ASCII.
func checkRequestID(id string) error {
	if len(id) > maxRequestIDBytes {
		return status.Errorf(codes.InvalidArgument, "request_id is %d bytes, over the limit of %d", len(id), maxRequestIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return status.Errorf(codes.InvalidArgument, "request_id must be printable ASCII without spaces; byte %d is 0x%02x", i, id[i])
		}
	}
	return nil
}

// promptHash identifies a request's prompt content, which a request_id is
// bound to.
func promptHash(req *acpgatev1.PromptRequest) []byte {
	content := &acpgatev1.PromptRequest{Prompt: req.GetPrompt(), Text: req.GetText(), Cwd: req.GetCwd()}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(content)
	sum := sha256.Sum256(b)
	return sum[:]
}

func requestTarget(req *acpgatev1.PromptRequest) string {
	if req.GetSessionId() != "" {
		return "session:" + req.GetSessionId()
	}
	return "agent:" + req.GetAgent()
}

// cancelsOnDisconnect applies on_disconnect's default.
func cancelsOnDisconnect(req *acpgatev1.PromptRequest) bool {
	switch req.GetOnDisconnect() {
	case acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CANCEL:
		return true
	case acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CONTINUE:
		return false
	}
	return req.GetRequestId() == ""
}

// recorded is what an earlier submission of a request_id left.
type recorded int

const (
	recordedNone   recorded = iota // nothing: start the turn
	recordedAttach                 // a turn to attach to
	recordedRetry                  // a retryable ending: start the next attempt
)

// previous decides what an earlier turn of the same request_id means for
// req.
func previous(rec store.Turn, req *acpgatev1.PromptRequest) (recorded, error) {
	if rec.Target != requestTarget(req) || !bytes.Equal(rec.PromptHash, promptHash(req)) {
		return recordedNone, status.Errorf(codes.AlreadyExists, "request_id %q was used for another prompt or target (turn %s)", req.GetRequestId(), rec.ID)
	}
	if rec.Running() {
		return recordedAttach, nil
	}
	var terminal acpgatev1.PromptEvent
	if err := proto.Unmarshal(rec.Terminal, &terminal); err != nil {
		return recordedNone, status.Errorf(codes.Internal, "turn %q's terminal does not decode: %v", rec.ID, err)
	}
	if terminal.GetError().GetRetryable() {
		return recordedRetry, nil
	}
	return recordedAttach, nil
}

// requestKey scopes a request_id to the caller that sent it: two callers
// using the same key run two turns and never learn of each other's. The
// separator cannot occur in a request_id (printable ASCII only).
func requestKey(owner, requestID string) string {
	if requestID == "" {
		return ""
	}
	return owner + "\x1f" + requestID
}

// requestIDOf is the request_id a client sent, from its scoped key.
func requestIDOf(key string) string {
	if i := strings.LastIndexByte(key, '\x1f'); i >= 0 {
		return key[i+1:]
	}
	return key
}
