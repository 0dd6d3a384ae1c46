// Package mcpoffer is what callers may ask of MCP servers for a session
// (CreateSessionRequest.mcp_servers, and a one-shot PromptRequest's): the
// operator's offer, and the checks of what a caller names against it.
package mcpoffer

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/config"
)

// A caller never chooses a program to run: a
// stdio server is one the operator offers, named; a remote one must live
// under a URL prefix the operator allows. What the agent supports is
// checked by acp once it has said so at initialize (acp/mcp.go).
//
// A URL outside the allow-list is PERMISSION_DENIED rather than
// INVALID_ARGUMENT: the request is well formed, and the operator's policy
// refuses it; the message names the prefixes, the rule to satisfy.
//
// Headers may carry credentials. They are passed to the agent and nowhere
// else: no log line, span, journal entry or session record holds them.
// That is also why a session opened with caller MCP servers is not
// recorded for re-opening (package sessions' Manager.register): re-opened without them, its
// servers would be dropped silently.

// Bounds on what a caller may name, so that one CreateSession cannot make
// session/new arbitrarily large.
const (
	maxCallerMCPServers    = 16
	maxMCPNameBytes        = 128
	maxMCPHeaders          = 32
	maxMCPHeaderValueBytes = 8 << 10
)

// Offer is what callers of one agent may ask for: the stdio servers
// offered by name (the gateway's and the agent's), the allowed URL
// prefixes, and the names of the servers the agent is always given, which
// a caller's may not reuse.
type Offer struct {
	offered  map[string]acpsdk.McpServer
	prefixes []string
	always   []string
}

// New is the offer to callers of agent a under the gateway's MCP
// configuration c.
func New(c config.MCP, a config.Agent) Offer {
	o := Offer{offered: map[string]acpsdk.McpServer{}, prefixes: c.AllowedURLPrefixes}
	for _, s := range slices.Concat(c.Offered, a.MCPOffered) {
		o.offered[s.Name] = acp.MCPStdio(s.Name, s.Command, s.Args, s.Env)
	}
	for _, s := range a.MCPServers {
		o.always = append(o.always, s.Name)
	}
	return o
}

// Names are the offered stdio servers' names, sorted.
func (o Offer) Names() []string {
	names := make([]string, 0, len(o.offered))
	for name := range o.offered {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Prefixes are the URL prefixes a remote server's URL must start with
// (mcp.allowed_url_prefixes).
func (o Offer) Prefixes() []string { return o.prefixes }

// Build checks a caller's MCP servers against the offer of agent (named
// in messages) and builds what session/new carries for them. Errors are
// gRPC statuses that name the server at fault by its index.
func (o Offer) Build(agent string, servers []*acpgatev1.McpServer) ([]acpsdk.McpServer, error) {
	if len(servers) > maxCallerMCPServers {
		return nil, status.Errorf(codes.InvalidArgument, "mcp_servers: %d servers, over the limit of %d", len(servers), maxCallerMCPServers)
	}
	out := make([]acpsdk.McpServer, 0, len(servers))
	seen := map[string]int{}
	for i, s := range servers {
		at := fmt.Sprintf("mcp_servers[%d]", i)
		var m acpsdk.McpServer
		var name string
		switch v := s.GetServer().(type) {
		case *acpgatev1.McpServer_Stdio:
			name = v.Stdio
			offered, ok := o.offered[name]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "%s: no stdio MCP server named %q is offered for agent %q; callers name one of the operator's (offered: %q)", at, name, agent, o.Names())
			}
			m = offered
		case *acpgatev1.McpServer_Http:
			name = v.Http.GetName()
			if err := o.checkRemote(at, v.Http); err != nil {
				return nil, err
			}
			m = acp.MCPRemote("http", name, v.Http.GetUrl(), headers(v.Http))
		case *acpgatev1.McpServer_Sse:
			name = v.Sse.GetName()
			if err := o.checkRemote(at, v.Sse); err != nil {
				return nil, err
			}
			m = acp.MCPRemote("sse", name, v.Sse.GetUrl(), headers(v.Sse))
		default:
			return nil, status.Errorf(codes.InvalidArgument, "%s: set one of http, sse and stdio", at)
		}
		if slices.Contains(o.always, name) {
			return nil, status.Errorf(codes.InvalidArgument, "%s: the name %q is taken by an MCP server the agent is always given", at, name)
		}
		if first, dup := seen[name]; dup {
			return nil, status.Errorf(codes.InvalidArgument, "%s: the name %q is also mcp_servers[%d]'s; names must be unique", at, name, first)
		}
		seen[name] = i
		out = append(out, m)
	}
	return out, nil
}

// checkRemote checks a remote server's name, URL and headers: the form
// (INVALID_ARGUMENT), then the allow-list (PERMISSION_DENIED).
func (o Offer) checkRemote(at string, s *acpgatev1.McpRemoteServer) error {
	if err := checkMCPName(s.GetName()); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: name: %v", at, err)
	}
	if err := CheckURL(s.GetUrl()); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s (%q): url: %v", at, s.GetName(), err)
	}
	if len(s.GetHeaders()) > maxMCPHeaders {
		return status.Errorf(codes.InvalidArgument, "%s (%q): %d headers, over the limit of %d", at, s.GetName(), len(s.GetHeaders()), maxMCPHeaders)
	}
	for j, h := range s.GetHeaders() {
		// The message names the header, never its value.
		if err := checkHeader(h.GetName(), h.GetValue()); err != nil {
			return status.Errorf(codes.InvalidArgument, "%s (%q): headers[%d]: %v", at, s.GetName(), j, err)
		}
	}
	if len(o.prefixes) == 0 {
		return status.Errorf(codes.PermissionDenied, "%s (%q): no remote MCP server is allowed: the operator has configured no mcp.allowed_url_prefixes", at, s.GetName())
	}
	for _, p := range o.prefixes {
		if strings.HasPrefix(s.GetUrl(), p) {
			return nil
		}
	}
	return status.Errorf(codes.PermissionDenied, "%s (%q): the URL %q is not allowed: an MCP server's URL must start with one of the operator's mcp.allowed_url_prefixes %q", at, s.GetName(), s.GetUrl(), o.prefixes)
}

func headers(s *acpgatev1.McpRemoteServer) []acpsdk.HttpHeader {
	out := make([]acpsdk.HttpHeader, len(s.GetHeaders()))
	for i, h := range s.GetHeaders() {
		out[i] = acpsdk.HttpHeader{Name: h.GetName(), Value: h.GetValue()}
	}
	return out
}

// checkMCPName holds a remote server's name to 1 to 128 bytes of
// printable ASCII, as it ends up in the agent's tool names and logs.
func checkMCPName(name string) error {
	if name == "" || len(name) > maxMCPNameBytes {
		return fmt.Errorf("must be 1 to %d bytes, got %d", maxMCPNameBytes, len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("must be printable ASCII; byte %d is 0x%02x", i, name[i])
		}
	}
	return nil
}

// CheckURL requires an absolute http or https URL with a host and
// without user information, a fragment, or "." and ".." path segments:
// an allow-list of prefixes compares the URL as written, so it must mean
// what it says (https://mcp.example.com/ok/../admin would pass the prefix
// https://mcp.example.com/ok/ and reach /admin). Package server checks
// notify_url, under webhooks.allowed_url_prefixes, with it too.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an http:// or https:// URL")
	case u.Host == "":
		return fmt.Errorf("has no host")
	case u.User != nil || u.Fragment != "":
		return fmt.Errorf("must not have user information or a fragment")
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg == "." || seg == ".." || strings.EqualFold(seg, "%2e") || strings.EqualFold(seg, "%2e%2e") || strings.EqualFold(seg, ".%2e") || strings.EqualFold(seg, "%2e.") {
			return fmt.Errorf(`must not have "." or ".." path segments`)
		}
	}
	return nil
}

// checkHeader requires an HTTP token as the name and a value without
// control characters other than tab (RFC 9110), at most 8 KiB.
func checkHeader(name, value string) error {
	if name == "" {
		return fmt.Errorf("the name is empty")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return fmt.Errorf("the name %q is not an HTTP token", name)
		}
	}
	if len(value) > maxMCPHeaderValueBytes {
		return fmt.Errorf("the value of %q is %d bytes, over the limit of %d", name, len(value), maxMCPHeaderValueBytes)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return fmt.Errorf("the value of %q has a control character at byte %d", name, i)
		}
	}
	return nil
}

func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
