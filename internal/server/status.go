package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// promptTooLarge is the status of a prompt over limits.max_prompt_bytes.
func promptTooLarge(n, limit int) error {
	return status.Errorf(codes.InvalidArgument, "the prompt is %d bytes, over the gateway's limit of %d bytes (limits.max_prompt_bytes)", n, limit)
}
