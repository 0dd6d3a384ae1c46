package config

import (
	"fmt"
	"net/url"
	"strings"
)

// mcpServers checks one list of stdio MCP servers (an agent's mcp_servers
// or mcp_offered, or mcp.offered) at path, held by owner: names required
// and unique, commands runnable.
func (v *checker) mcpServers(path, owner string, servers []MCPServer) {
	firstByName := map[string]int{}
	list := listName(path)
	for i, s := range servers {
		spath := fmt.Sprintf("%s[%d]", path, i)
		if v.bad[spath] {
			continue
		}
		slabel := mcpLabel(owner, list, s.Name, i)
		if s.Name == "" {
			v.add(spath+".name", "%s: name is required", slabel)
		} else if first, dup := firstByName[s.Name]; dup {
			v.add(spath+".name", "%s: duplicate name, first used by %s[%d]%s", slabel, list, first, v.at(fmt.Sprintf("%s[%d]", path, first)))
		} else {
			firstByName[s.Name] = i
		}
		v.command(spath+".command", slabel, s.Command)
		v.args(spath+".args", slabel+": args", s.Args)
		v.env(spath+".env", slabel+": env", s.Env)
	}
}

// mcp checks the MCP policy: prefixes that end at a path boundary, the
// offered servers, and that a name a caller may ask for means one server
// for each agent (not offered twice, not one the agent is always given).
func (v *checker) mcp(c *Config) {
	for i, prefix := range c.MCP.AllowedURLPrefixes {
		path := fmt.Sprintf("mcp.allowed_url_prefixes[%d]", i)
		if err := CheckURLPrefix(prefix); err != nil {
			v.add(path, "%s: %v", path, err)
		}
	}
	v.mcpServers("mcp.offered", "mcp", c.MCP.Offered)
	top := map[string]bool{}
	for _, s := range c.MCP.Offered {
		top[s.Name] = true
	}
	for i, a := range c.Agents {
		label := agentLabel(a.Name, i)
		always := map[string]bool{}
		for _, s := range a.MCPServers {
			always[s.Name] = true
		}
		for j, s := range a.MCPOffered {
			if s.Name != "" && top[s.Name] {
				v.add(fmt.Sprintf("agents[%d].mcp_offered[%d].name", i, j), "%s, mcp server %q: also offered in mcp.offered; a caller's name must mean one server", label, s.Name)
			}
		}
		reported := map[string]bool{}
		for _, s := range c.MCP.Offered {
			if s.Name != "" && always[s.Name] && !reported[s.Name] {
				reported[s.Name] = true
				v.add(fmt.Sprintf("agents[%d].mcp_servers", i), "%s: mcp server %q is both always given to the agent (mcp_servers) and offered in mcp.offered; rename one", label, s.Name)
			}
		}
		for j, s := range a.MCPOffered {
			if always[s.Name] {
				v.add(fmt.Sprintf("agents[%d].mcp_offered[%d].name", i, j), "%s, mcp server %q: also in the agent's mcp_servers, which it is always given", label, s.Name)
			}
		}
	}
}

// CheckURLPrefix reports why prefix cannot be an allowed MCP URL prefix:
// it must be an absolute http or https URL with a host, without user
// information, query or fragment, whose path ends in "/". Without the
// final "/" a prefix would admit other hosts and paths that merely start
// the same ("https://mcp.example.com" admits https://mcp.example.com.evil.test).
func CheckURLPrefix(prefix string) error {
	u, err := url.Parse(prefix)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %v", prefix, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q must be an http:// or https:// URL", prefix)
	case u.Host == "":
		return fmt.Errorf("%q has no host", prefix)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("%q must not have user information, a query or a fragment", prefix)
	case !strings.HasSuffix(u.Path, "/"):
		return fmt.Errorf("%q must end with \"/\" (as in %q) so that it ends at a path boundary and admits no other host", prefix, strings.TrimRight(prefix, "/")+"/")
	}
	return nil
}
