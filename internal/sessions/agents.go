package sessions

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/mcpoffer"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/spelling"
)

// catalog is the configured agents, by name, and who may use them.
type catalog struct {
	list   []*agentEntry // in the configuration's order
	byName map[string]*agentEntry
	authz  access.Authz
}

// agentEntry is a configured agent and what the gateway learned of it.
type agentEntry struct {
	cfg     config.Agent
	acp     acp.Config
	m       *metrics.Agent    // nil without metrics
	pool    *pool             // its warm processes; nil when it keeps none
	share   *sharing          // its processes several sessions share; nil without reuse_process
	starts  *admission.Starts // the gateway's bound on start-ups at once, every agent's
	startup startupStatus
	mcp     mcpoffer.Offer // what callers may ask of MCP servers
	mu      sync.Mutex
	caps    *acpgatev1.AgentCapabilities
	// mcpTransports are the remote MCP transports the agent advertised
	// at its last initialize, for ListAgents.
	mcpTransports []string
}

// usable are the agents the caller may use, in the configuration's order:
// the only ones a caller learns the names of.
func (c *catalog) usable(ctx context.Context) []*agentEntry {
	var out []*agentEntry
	for _, a := range c.list {
		if c.authz.MayUse(ctx, a.cfg.Name) {
			out = append(out, a)
		}
	}
	return out
}

// agentFor is the configured agent named agent, when the caller may use
// it: NOT_FOUND or the authorization's refusal otherwise.
func (c *catalog) agentFor(ctx context.Context, agent string) (*agentEntry, error) {
	entry, ok := c.byName[agent]
	if !ok {
		return nil, status.Error(codes.NotFound, c.unknownAgent(ctx, agent))
	}
	if err := c.authz.Use(ctx, agent); err != nil {
		return nil, err
	}
	return entry, nil
}

// unknownAgent says that no agent is named agent, suggests the nearest
// names and lists the agents the caller may use: a mistyped name is the
// usual cause, and the list is what to choose from. Both leave out the
// agents the caller's allow excludes, whose names are not the caller's to
// learn.
func (c *catalog) unknownAgent(ctx context.Context, agent string) string {
	var usable []string
	for _, a := range c.usable(ctx) {
		usable = append(usable, a.cfg.Name)
	}
	msg := fmt.Sprintf("no agent named %q is configured", agent)
	if near := spelling.Nearest(agent, usable); len(near) > 0 {
		quoted := make([]string, len(near))
		for i, n := range near {
			quoted[i] = strconv.Quote(n)
		}
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(quoted, " or "))
	}
	if len(usable) == 0 {
		return msg + "; no agent configured is one you may use"
	}
	return msg + "; the agents you may use: " + strings.Join(usable, ", ")
}

// callerMCP checks a caller's MCP servers for agent and builds what
// session/new carries for them; nil when there are none. The caller must
// be allowed to use the agent: the offer is the agent's business only.
func (c *catalog) callerMCP(ctx context.Context, agent string, servers []*acpgatev1.McpServer) ([]acpsdk.McpServer, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	entry, err := c.agentFor(ctx, agent)
	if err != nil {
		return nil, err
	}
	return entry.mcp.Build(agent, servers)
}

// info is e's ListAgents entry.
func (e *agentEntry) info() *acpgatev1.Agent {
	e.mu.Lock()
	caps, transports := e.caps, e.mcpTransports
	e.mu.Unlock()
	info := &acpgatev1.Agent{
		Name:              e.cfg.Name,
		Description:       e.cfg.Description,
		Capabilities:      caps,
		PermissionPolicy:  string(e.cfg.PermissionPolicy),
		ElicitationPolicy: string(e.cfg.Elicitation),
		FsRead:            e.cfg.FS.Read,
		FsWrite:           e.cfg.FS.Write,
		WarmTarget:        uint32(e.cfg.Warm),
		McpOffered:        e.mcp.Names(),
		McpTransports:     transports,
		McpUrlPrefixes:    e.mcp.Prefixes(),
	}
	if e.pool != nil {
		ready, starting := e.pool.counts()
		info.WarmReady, info.WarmStarting = uint32(ready), uint32(starting)
	}
	if e.share != nil {
		info.ReuseProcess, info.MaxSessionsPerProcess = true, uint32(e.cfg.MaxSessionsPerProcess)
		info.SharedProcesses = uint32(e.share.count())
	}
	e.startup.fill(info)
	return info
}

// noteCapabilities records what the agent said of itself at its last
// initialize, for ListAgents: an operator sees what it supports without
// opening a session.
func (e *agentEntry) noteCapabilities(info acp.AgentInfo) {
	caps := &acpgatev1.AgentCapabilities{
		ProtocolVersion:       int32(info.ProtocolVersion),
		AgentName:             info.Name,
		AgentVersion:          info.Version,
		LoadSession:           info.Capabilities.LoadSession,
		PromptImage:           info.Capabilities.PromptCapabilities.Image,
		PromptAudio:           info.Capabilities.PromptCapabilities.Audio,
		PromptEmbeddedContext: info.Capabilities.PromptCapabilities.EmbeddedContext,
		AuthMethods:           info.AuthMethods,
		ObservedAt:            timestamppb.Now(),
		SessionResume:         info.Capabilities.SessionCapabilities.Resume != nil,
		SessionList:           info.Capabilities.SessionCapabilities.List != nil,
		SessionClose:          info.Capabilities.SessionCapabilities.Close != nil,
		SessionDelete:         info.DeleteSessions,
	}
	var transports []string
	if info.Capabilities.McpCapabilities.Http {
		transports = append(transports, "http")
	}
	if info.Capabilities.McpCapabilities.Sse {
		transports = append(transports, "sse")
	}
	e.mu.Lock()
	e.caps, e.mcpTransports = caps, transports
	e.mu.Unlock()
}
