// Package acp runs external agents over the Agent Client Protocol (ACP,
// version 1; github.com/coder/acp-go-sdk) as models: "acp:<name>" names an
// agent process of the config file THREADLINE_ACP_CONFIG, and a run of it
// spawns the process, opens an ACP session and sends the turn as one
// prompt. The agent runs its own tools, so its Agent is a model whose one
// step streams the whole turn: text, reasoning, tool calls already run with
// their results (step.ToolResult), plans and files as data parts. A
// permission the agent asks for ends the run requires_action with the
// process kept waiting (see Agent); the continuation's answer goes back as
// the option the agent offered.
//
// The config file:
//
//	{"agents": {
//	  "coder": {"command": "my-agent", "args": ["--acp"], "env": {"KEY": "${MY_AGENT_KEY}"},
//	            "cwd": "/srv/work", "timeout": "120s", "permission_timeout": "10m"}
//	}}
//
// An agent process runs in its own process group with a small environment
// (PATH, HOME, LANG, TMPDIR) plus its "env", in which ${VAR} takes VAR
// from the service's environment.
package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"time"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// EnvConfig is the variable naming the config file.
const EnvConfig = "THREADLINE_ACP_CONFIG"

// Defaults of an agent.
const (
	// DefaultTimeout is the longest the agent may stay silent while the
	// service waits for it (to start, to answer, between updates).
	DefaultTimeout = 60 * time.Second
	// DefaultPermissionTimeout is how long a process that asked for a
	// permission is kept waiting for the person's answer.
	DefaultPermissionTimeout = 10 * time.Minute
	// DefaultMaxMessageBytes bounds one JSON-RPC line of the agent.
	DefaultMaxMessageBytes = 8 << 20
	// cancelGrace is how long a cancelled prompt may take to answer.
	cancelGrace = 3 * time.Second
)

// Config is the config file.
type Config struct {
	Agents map[string]AgentConfig `json:"agents"`
}

// AgentConfig is one agent process.
type AgentConfig struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Cwd is the process's working directory and the session's cwd (an
	// absolute path); the service's own directory when empty.
	Cwd string `json:"cwd,omitempty"`
	// Timeout is the longest silence: "90s" or seconds (DefaultTimeout).
	Timeout Duration `json:"timeout,omitempty"`
	// PermissionTimeout is how long a process waits for a person's
	// answer to a permission it asked for (DefaultPermissionTimeout).
	PermissionTimeout Duration `json:"permission_timeout,omitempty"`
	// MaxMessageBytes bounds one line the agent sends (DefaultMaxMessageBytes).
	MaxMessageBytes int `json:"max_message_bytes,omitempty"`
}

// Duration is a time.Duration read from JSON as "90s" or as seconds.
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
		return fmt.Errorf("want a duration such as \"60s\" or a number of seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseConfig decodes a config file strictly (unknown fields are errors)
// and checks it. Errors are invalid_request *errcode.Error naming the agent.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, errcode.New(errcode.Invalid, "not an ACP agents file: %v", err)
	}
	for _, name := range c.Names() {
		a := c.Agents[name]
		switch {
		case !validName.MatchString(name):
			return c, errcode.New(errcode.Invalid, "agent %q: a name is 1 to 64 letters, digits, _, . or -", name)
		case a.Command == "":
			return c, errcode.New(errcode.Invalid, "agent %q: no command", name)
		case a.Timeout < 0 || a.PermissionTimeout < 0 || a.MaxMessageBytes < 0:
			return c, errcode.New(errcode.Invalid, "agent %q: timeout, permission_timeout and max_message_bytes must not be negative", name)
		case a.Cwd != "" && !isAbs(a.Cwd):
			return c, errcode.New(errcode.Invalid, "agent %q: cwd must be an absolute path, got %q", name, a.Cwd)
		}
	}
	return c, nil
}

func isAbs(p string) bool { return len(p) > 0 && p[0] == '/' }

// LoadConfig reads and parses the file at path; errors as ParseConfig's,
// or the read's.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, errcode.New(errcode.Invalid, "%v", err)
	}
	return ParseConfig(data)
}

// Names returns the agents' names, sorted.
func (c Config) Names() []string {
	out := make([]string, 0, len(c.Agents))
	for n := range c.Agents {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// withDefaults fills the zero settings.
func (a AgentConfig) withDefaults() AgentConfig {
	if a.Timeout == 0 {
		a.Timeout = Duration(DefaultTimeout)
	}
	if a.PermissionTimeout == 0 {
		a.PermissionTimeout = Duration(DefaultPermissionTimeout)
	}
	if a.MaxMessageBytes == 0 {
		a.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return a
}
