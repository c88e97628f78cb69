// Package mcp exposes the tools of MCP servers named in a config file as
// server tools (tool.Tool), through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), over stdio (a command the
// service starts) and streamable HTTP (a URL).
//
// A server's tool is named "<server>__<tool>" (two underscores): every
// provider accepts only letters, digits, _ and - in a tool name, so a dot
// cannot separate them. Characters of an MCP tool name outside that set
// become _, and a name longer than 64 bytes is left out (with an error
// from Open naming it).
//
// The config file:
//
//	{"servers": [
//	  {"name": "files", "command": "mcp-server-filesystem", "args": ["/srv/shared"],
//	   "env": {"TOKEN": "${FILES_TOKEN}"}, "approval": ["write_file"], "timeout": "30s"},
//	  {"name": "search", "url": "http://127.0.0.1:9000/mcp", "approval": false}
//	]}
//
// A stdio server runs with a small environment (PATH, HOME, LANG, TMPDIR)
// plus its "env", in which ${VAR} takes VAR from the service's environment,
// so keys stay out of the file and other secrets out of the server.
// "approval" is true (every tool needs a person's approval), false (none,
// the default) or a list of the server's tool names (as the server names
// them) that need it. "tools", when given, lists the only tools offered.
package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// Config is the MCP config file.
type Config struct {
	Servers []ServerConfig `json:"servers"`
}

// ServerConfig is one MCP server.
type ServerConfig struct {
	// Name prefixes the server's tools; letters, digits, - and single _.
	Name string `json:"name"`
	// Command, Args and Env start a stdio server.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL is a streamable HTTP server's endpoint.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request; ${VAR} expands as in Env.
	Headers map[string]string `json:"headers,omitempty"`
	// Approval is which tools need approval: true, false or names.
	Approval Approval `json:"approval,omitempty"`
	// Tools, when not empty, are the only tools of the server offered.
	Tools []string `json:"tools,omitempty"`
	// Timeout bounds one call (default 30s).
	Timeout Duration `json:"timeout,omitempty"`
}

// Approval says which tools of a server need approval.
type Approval struct {
	All   bool
	Names []string
}

// UnmarshalJSON reads true, false or a list of tool names.
func (a *Approval) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &a.All); err == nil {
		return nil
	}
	if err := json.Unmarshal(b, &a.Names); err != nil {
		return fmt.Errorf("approval: want true, false or a list of tool names, got %s", b)
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (a Approval) MarshalJSON() ([]byte, error) {
	if len(a.Names) > 0 {
		return json.Marshal(a.Names)
	}
	return json.Marshal(a.All)
}

func (a Approval) needs(tool string) bool {
	if a.All {
		return true
	}
	for _, n := range a.Names {
		if n == tool {
			return true
		}
	}
	return false
}

// Duration is a time.Duration read from JSON as "30s" or as seconds.
type Duration time.Duration

// UnmarshalJSON reads "1m30s" or 90.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("want a duration such as \"30s\" or a number of seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// DefaultTimeout bounds one call of a server that sets no timeout.
const DefaultTimeout = 30 * time.Second

// Separator joins a server's name and its tool's name.
const Separator = "__"

var serverName = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// ParseConfig decodes and checks a config file strictly (unknown fields
// are errors). It returns an invalid_request *errcode.Error saying what is
// wrong.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, errcode.New(errcode.Invalid, "not an MCP config file: %v", err)
	}
	seen := map[string]bool{}
	for i, s := range c.Servers {
		switch {
		case !serverName.MatchString(s.Name) || len(s.Name) > 40:
			return c, errcode.New(errcode.Invalid, "server %d: name %q: want up to 40 letters, digits, - and single _", i+1, s.Name)
		case seen[s.Name]:
			return c, errcode.New(errcode.Invalid, "server %q is defined twice", s.Name)
		case (s.Command == "") == (s.URL == ""):
			return c, errcode.New(errcode.Invalid, "server %q: give either command (stdio) or url (streamable HTTP)", s.Name)
		case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0):
			return c, errcode.New(errcode.Invalid, "server %q: args and env are for stdio servers", s.Name)
		case s.Command != "" && len(s.Headers) > 0:
			return c, errcode.New(errcode.Invalid, "server %q: headers are for HTTP servers", s.Name)
		case s.Timeout < 0:
			return c, errcode.New(errcode.Invalid, "server %q: timeout must not be negative", s.Name)
		}
		if s.URL != "" {
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return c, errcode.New(errcode.Invalid, "server %q: url %q is not an http(s) URL", s.Name, s.URL)
			}
		}
		seen[s.Name] = true
	}
	return c, nil
}

// LoadConfig reads a config file (see ParseConfig).
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, errcode.New(errcode.Invalid, "MCP config: %v", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return c, errcode.New(errcode.Invalid, "MCP config %s: %s", path, errcode.Message(err))
	}
	return c, nil
}

// ToolName is the server tool name of an MCP server's tool, and whether
// it is one providers accept.
func ToolName(server, tool string) (string, bool) {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString(Separator)
	for _, r := range tool {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	return name, len(tool) > 0 && len(name) <= 64
}
