package clientreq

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
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

// CodeResourceNotFound is ACP's error code for a path that does not exist.
// Agents recognise a missing file by it (Qwen Code by the code alone, Gemini
// CLI by the message "Resource not found"): answered with -32602 instead,
// they take the read as failed rather than the file as new, and a tool that
// reads before it writes (creating a file) fails without asking.
const CodeResourceNotFound = -32002

// Files serves one session's fs/* requests as its FSAccess allows, from
// and to its working directory only.
type Files struct {
	access FSAccess
	cwd    string // resolved, symlink-free
}

// NewFiles serves access beneath cwd, an absolute path without symlinks.
func NewFiles(access FSAccess, cwd string) Files { return Files{access: access, cwd: cwd} }

func fsError(code int64, format string, args ...any) *jsonrpc.ErrorObject {
	return &jsonrpc.ErrorObject{Code: code, Message: fmt.Sprintf(format, args...)}
}

// confine resolves path (absolute, symlinks followed) and checks that it
// lies inside the session's working directory. For a file that does not
// exist yet (a write), its parent directory is resolved instead.
func (files Files) confine(path string, mayNotExist bool) (string, *jsonrpc.ErrorObject) {
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
			// The ACP SDKs' wording, then the gateway's: agents match either.
			e := fsError(CodeResourceNotFound, "Resource not found: path %q does not exist", path)
			e.Data = map[string]string{"uri": path}
			return "", e
		}
		return "", fsError(jsonrpc.CodeInternalError, "resolving path %q: %v", path, err)
	}
	rel, err := filepath.Rel(files.cwd, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fsError(jsonrpc.CodeInvalidParams, "path %q is outside the session's working directory", path)
	}
	return resolved, nil
}

// openInWorkspace opens resolved, a path confine accepted (reqPath as the
// agent gave it), with flag, beneath the session's working directory, and
// refuses anything but a regular file.
//
// confine checks the path as it was when it looked; the agent runs beside
// the gateway and can change the path before the gateway opens it. With a
// symlink to a file outside swapped in, an open by path would read or
// write outside the working directory; with a FIFO, the open would block
// for good (until some writer or reader appeared), holding an OS thread per
// request past the session's end, until the gateway ran out of threads.
// os.Root opens beneath the working directory whatever the path has become
// (a symlink that leads out is refused), O_NONBLOCK makes opening a FIFO or
// device return at once, and the kind is checked on what was opened, not
// on the path.
func (files Files) openInWorkspace(reqPath, resolved string, flag int, perm os.FileMode) (*os.File, os.FileInfo, *jsonrpc.ErrorObject) {
	rel, err := filepath.Rel(files.cwd, resolved)
	if err != nil {
		return nil, nil, fsError(jsonrpc.CodeInvalidParams, "path %q is outside the session's working directory", reqPath)
	}
	root, err := os.OpenRoot(files.cwd)
	if err != nil {
		return nil, nil, fsError(jsonrpc.CodeInternalError, "opening the session's working directory: %v", err)
	}
	defer root.Close()
	f, err := root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	notRegular := func() *jsonrpc.ErrorObject {
		return fsError(jsonrpc.CodeInvalidParams, "%q is not a regular file", reqPath)
	}
	switch {
	case errors.Is(err, syscall.ENXIO): // a FIFO without a reader, opened for writing
		return nil, nil, notRegular()
	case err != nil:
		return nil, nil, fsError(jsonrpc.CodeInternalError, "opening %q: %v", reqPath, err)
	}
	info, err := f.Stat()
	switch {
	case err != nil:
		_ = f.Close()
		return nil, nil, fsError(jsonrpc.CodeInternalError, "opening %q: %v", reqPath, err)
	case !info.Mode().IsRegular():
		_ = f.Close()
		return nil, nil, notRegular()
	}
	return f, info, nil
}

// Read answers fs/read_text_file. It reserves the file's size of
// the connection's answer budget before reading it (and as much again
// before selecting lines from it, which copies them), so that reads an
// agent does not collect wait, or fail, before the gateway holds them.
func (files Files) Read(ctx context.Context, params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	if !files.access.Read {
		return nil, fsError(jsonrpc.CodeMethodNotFound, "fs/read_text_file is not enabled for this agent")
	}
	var req acpsdk.ReadTextFileRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, fsError(jsonrpc.CodeInvalidParams, "fs/read_text_file params: %v", err)
	}
	path, rpcErr := files.confine(req.Path, false)
	if rpcErr != nil {
		return nil, rpcErr
	}
	f, info, rpcErr := files.openInWorkspace(req.Path, path, os.O_RDONLY, 0)
	if rpcErr != nil {
		return nil, rpcErr
	}
	defer f.Close()
	limit := files.access.MaxReadBytes
	if limit <= 0 {
		limit = DefaultMaxReadBytes
	}
	if info.Size() > limit {
		return nil, fsError(jsonrpc.CodeInvalidParams, "%q is %d bytes, over the read limit of %d bytes", req.Path, info.Size(), limit)
	}
	if rpcErr := jsonrpc.Reserve(ctx, info.Size()); rpcErr != nil {
		return nil, rpcErr
	}
	text, err := readText(f, info.Size(), limit)
	if err != nil {
		return nil, fsError(jsonrpc.CodeInternalError, "reading %q: %v", req.Path, err)
	}
	if req.Line != nil || req.Limit != nil {
		if rpcErr := jsonrpc.Reserve(ctx, int64(len(text))+1); rpcErr != nil {
			return nil, rpcErr
		}
	}
	content, rpcErr := selectLines(text, req.Line, req.Limit)
	if rpcErr != nil {
		return nil, rpcErr
	}
	return jsonrpc.TextResult{Member: "content", Text: content}, nil
}

// readText reads an open file of about size bytes into one string of its
// own, failing if it has grown past limit since it was measured. Reading
// into bytes and converting would allocate the file twice, and the answers
// to the agent's reads in flight are what bounds the gateway's memory
// against an agent that floods it with them.
func readText(f *os.File, size, limit int64) (string, error) {
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

// Write answers fs/write_text_file.
func (files Files) Write(params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	if !files.access.Write {
		return nil, fsError(jsonrpc.CodeMethodNotFound, "fs/write_text_file is not enabled for this agent")
	}
	var req acpsdk.WriteTextFileRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, fsError(jsonrpc.CodeInvalidParams, "fs/write_text_file params: %v", err)
	}
	limit := files.access.MaxWriteBytes
	if limit <= 0 {
		limit = DefaultMaxWriteBytes
	}
	if int64(len(req.Content)) > limit {
		return nil, fsError(jsonrpc.CodeInvalidParams, "the content is %d bytes, over the write limit of %d bytes", len(req.Content), limit)
	}
	path, rpcErr := files.confine(req.Path, true)
	if rpcErr != nil {
		return nil, rpcErr
	}
	f, _, rpcErr := files.openInWorkspace(req.Path, path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if rpcErr != nil {
		return nil, rpcErr
	}
	_, err := io.WriteString(f, req.Content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fsError(jsonrpc.CodeInternalError, "writing %q: %v", req.Path, err)
	}
	return acpsdk.WriteTextFileResponse{}, nil
}
