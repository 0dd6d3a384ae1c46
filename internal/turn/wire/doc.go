// Package wire is the few places of a PromptEvent's protobuf encoding the
// gateway writes or reads itself, rather than through proto.Marshal.
//
// Why by hand: a turn's events are encoded once, when they are journaled,
// and every stream and every replay sends those bytes as they are (see
// Encoded). Two shapes are worth encoding in pieces that share a string's
// memory instead of copying it: a long text chunk (Encode with
// encodeChunkPieces) and a completed turn's outcome, which repeats the
// answer (encodePieces). Their bytes are exactly those proto.Marshal gives,
// tested byte for byte, so a reader of the store or of a stream sees an
// ordinary encoding. The audit reads a journaled event back without
// copying an answer out of it (DecodeForAudit).
//
// Field numbers come from the descriptors (fields.go), so a renumbered
// field cannot be missed here.
package wire
