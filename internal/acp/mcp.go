package acp

import (
	"maps"
	"slices"

	acpsdk "github.com/coder/acp-go-sdk"
)

// MCP servers a caller names for one session (OpenOptions.MCPServers) go
// to the agent after the configured ones (Config.MCPServers). ACP makes
// stdio the one transport every agent supports; HTTP and SSE an agent
// opts in to (agentCapabilities.mcpCapabilities). The gateway checks that
// itself, before session/new, because an agent sent a server over a
// transport it did not opt in to may skip it without a word, and the
// caller would believe its tools were there.

// The capabilities naming the remote transports, as
// capability_not_supported names them.
const (
	PrimitiveMCPHTTP = "mcpCapabilities.http"
	PrimitiveMCPSSE  = "mcpCapabilities.sse"
)

// mcpTransport returns a server's transport ("stdio", "http", "sse"),
// its name, and the capability it needs ("" for stdio).
func mcpTransport(m acpsdk.McpServer) (transport, name, primitive string) {
	switch {
	case m.Http != nil:
		return "http", m.Http.Name, PrimitiveMCPHTTP
	case m.Sse != nil:
		return "sse", m.Sse.Name, PrimitiveMCPSSE
	case m.Stdio != nil:
		return "stdio", m.Stdio.Name, ""
	}
	return "", "", ""
}

// unsupportedMCP finds the first of servers whose transport the agent did
// not advertise; ok is false when every one may be sent.
func unsupportedMCP(caps acpsdk.McpCapabilities, servers []acpsdk.McpServer) (index int, transport, name, primitive string, ok bool) {
	for i, m := range servers {
		transport, name, primitive := mcpTransport(m)
		if (primitive == PrimitiveMCPHTTP && !caps.Http) || (primitive == PrimitiveMCPSSE && !caps.Sse) {
			return i, transport, name, primitive, true
		}
	}
	return 0, "", "", "", false
}

// sessionMCP is what session/new, session/load and session/resume carry:
// the configured servers, then the caller's; never null, which ACP
// forbids.
func (s *Session) sessionMCP(opts OpenOptions) ([]acpsdk.McpServer, error) {
	if i, transport, name, primitive, found := unsupportedMCP(s.info.Capabilities.McpCapabilities, opts.MCPServers); found {
		return nil, &Error{Proto: s.interp.MCPTransportNotSupported(transport, name, i, primitive)}
	}
	out := make([]acpsdk.McpServer, 0, len(s.cfg.MCPServers)+len(opts.MCPServers))
	out = append(out, s.cfg.MCPServers...)
	return append(out, opts.MCPServers...), nil
}

// MCPStdio is a stdio MCP server as session/new carries it; env is sent
// sorted by name, so the request is the same for the same configuration.
// args and env are never null: ACP requires both.
func MCPStdio(name, command string, args []string, env map[string]string) acpsdk.McpServer {
	s := &acpsdk.McpServerStdio{Name: name, Command: command, Args: append([]string{}, args...), Env: []acpsdk.EnvVariable{}}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		s.Env = append(s.Env, acpsdk.EnvVariable{Name: k, Value: env[k]})
	}
	return acpsdk.McpServer{Stdio: s}
}

// MCPRemote is an MCP server reached by URL over transport ("http" or
// "sse"), with headers in order; headers is never null, as ACP requires.
func MCPRemote(transport, name, url string, headers []acpsdk.HttpHeader) acpsdk.McpServer {
	h := append([]acpsdk.HttpHeader{}, headers...)
	if transport == "sse" {
		return acpsdk.McpServer{Sse: &acpsdk.McpServerSseInline{Type: "sse", Name: name, Url: url, Headers: h}}
	}
	return acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Type: "http", Name: name, Url: url, Headers: h}}
}
