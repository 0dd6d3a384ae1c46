package acp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/acpgate/acpgate/acp/jsonrpc"
)

// Default size limits for fs requests.
const (
	DefaultMaxReadBytes  = 8 << 20
	DefaultMaxWriteBytes = 8 << 20
)

// FSAccess says which fs/* requests an agent may make. Both are confined to
// the session's working directory.
type FSAccess struct {
	Read  bool
	Write bool
	// MaxReadBytes bounds the size of a file that may be read;
	// DefaultMaxReadBytes when zero.
	MaxReadBytes int64
	// MaxWriteBytes bounds the content of one write; DefaultMaxWriteBytes
	// when zero.
	MaxWriteBytes int64
}

func fsError(code int64, format string, args ...any) *jsonrpc.ErrorObject {
	return &jsonrpc.ErrorObject{Code: code, Message: fmt.Sprintf(format, args...)}
}

// confine resolves path (absolute, symlinks followed) and checks that it
// lies inside the session's working directory. For a file that does not
// exist yet (a write), its parent directory is resolved instead.
func (s *Session) confine(path string, mayNotExist bool) (string, *jsonrpc.ErrorObject) {
	if !filepath.IsAbs(path) {
		return "", fsError(jsonrpc.CodeInvalidParams, "path %q is not absolute; ACP requires absolute paths", path)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) && mayNotExist {
		var parent string
		parent, err = filepath.EvalSymlinks(filepath.Dir(path))
		resolved = filepath.Join(parent, filepath.Base(path))
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fsError(jsonrpc.CodeInvalidParams, "path %q does not exist", path)
		}
		return "", fsError(jsonrpc.CodeInternalError, "resolving path %q: %v", path, err)
	}
	rel, err := filepath.Rel(s.cwd, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fsError(jsonrpc.CodeInvalidParams, "path %q is outside the session's working directory", path)
	}
	return resolved, nil
}

func (s *Session) readTextFile(params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	if !s.cfg.FS.Read {
		return nil, fsError(jsonrpc.CodeMethodNotFound, "fs/read_text_file is not enabled for this agent")
	}
	var req acpsdk.ReadTextFileRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, fsError(jsonrpc.CodeInvalidParams, "fs/read_text_file params: %v", err)
	}
	path, rpcErr := s.confine(req.Path, false)
	if rpcErr != nil {
		return nil, rpcErr
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fsError(jsonrpc.CodeInternalError, "reading %q: %v", req.Path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fsError(jsonrpc.CodeInvalidParams, "%q is not a regular file", req.Path)
	}
	limit := s.cfg.FS.MaxReadBytes
	if limit <= 0 {
		limit = DefaultMaxReadBytes
	}
	if info.Size() > limit {
		return nil, fsError(jsonrpc.CodeInvalidParams, "%q is %d bytes, over the read limit of %d bytes", req.Path, info.Size(), limit)
	}
	text, err := readText(path, info.Size(), limit)
	if err != nil {
		return nil, fsError(jsonrpc.CodeInternalError, "reading %q: %v", req.Path, err)
	}
	content, rpcErr := selectLines(text, req.Line, req.Limit)
	if rpcErr != nil {
		return nil, rpcErr
	}
	return acpsdk.ReadTextFileResponse{Content: content}, nil
}

// readText reads a file of about size bytes into one string of its own,
// failing if it has grown past limit since it was measured. Reading into
// bytes and converting would allocate the file twice, and the answers to
// the agent's reads in flight are what bounds the gateway's memory against
// an agent that floods it with them.
func readText(path string, size, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	b.Grow(int(size))
	n, err := io.Copy(&b, io.LimitReader(f, limit+1))
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", fmt.Errorf("the file grew past the read limit of %d bytes while it was read", limit)
	}
	return b.String(), nil
}

// selectLines applies ACP's line (1-based first line) and limit (number of
// lines) to a file's text.
func selectLines(text string, line, limit *int) (string, *jsonrpc.ErrorObject) {
	if line == nil && limit == nil {
		return text, nil
	}
	first := 1
	if line != nil {
		if *line < 1 {
			return "", fsError(jsonrpc.CodeInvalidParams, "line must be at least 1, got %d", *line)
		}
		first = *line
	}
	if limit != nil && *limit < 0 {
		return "", fsError(jsonrpc.CodeInvalidParams, "limit must not be negative, got %d", *limit)
	}
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), len(text)+1)
	n, taken := 0, 0
	for sc.Scan() {
		n++
		if n < first {
			continue
		}
		if limit != nil && taken >= *limit {
			break
		}
		b.WriteString(sc.Text())
		b.WriteByte('\n')
		taken++
	}
	return b.String(), nil
}

func (s *Session) writeTextFile(params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	if !s.cfg.FS.Write {
		return nil, fsError(jsonrpc.CodeMethodNotFound, "fs/write_text_file is not enabled for this agent")
	}
	var req acpsdk.WriteTextFileRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, fsError(jsonrpc.CodeInvalidParams, "fs/write_text_file params: %v", err)
	}
	limit := s.cfg.FS.MaxWriteBytes
	if limit <= 0 {
		limit = DefaultMaxWriteBytes
	}
	if int64(len(req.Content)) > limit {
		return nil, fsError(jsonrpc.CodeInvalidParams, "the content is %d bytes, over the write limit of %d bytes", len(req.Content), limit)
	}
	path, rpcErr := s.confine(req.Path, true)
	if rpcErr != nil {
		return nil, rpcErr
	}
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return nil, fsError(jsonrpc.CodeInvalidParams, "%q is not a regular file", req.Path)
	}
	if err := os.WriteFile(path, []byte(req.Content), 0o644); err != nil {
		return nil, fsError(jsonrpc.CodeInternalError, "writing %q: %v", req.Path, err)
	}
	return acpsdk.WriteTextFileResponse{}, nil
}
