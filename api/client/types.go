package client

import "github.com/threadline/threadline/api/wire"

// The client decodes the service's JSON into the wire package's types:
// one Go type per shape, shared with the service that writes them.

// Event kinds of a run's stream.
const (
	EventSnapshot   = wire.EventSnapshot
	EventToken      = wire.EventToken
	EventReasoning  = wire.EventReasoning
	EventToolCall   = wire.EventToolCall
	EventToolResult = wire.EventToolResult
	EventData       = wire.EventData
	EventError      = wire.EventError
)

// Run statuses, of a snapshot event's run_status and of RunInfo.Status.
const (
	StatusRunning        = wire.StatusRunning
	StatusSucceeded      = wire.StatusSucceeded
	StatusFailed         = wire.StatusFailed
	StatusCancelled      = wire.StatusCancelled
	StatusInterrupted    = wire.StatusInterrupted
	StatusRequiresAction = wire.StatusRequiresAction
)

type (
	Event           = wire.Event
	Message         = wire.Message
	MessageStatus   = wire.MessageStatus
	MessageMetadata = wire.MessageMetadata
	Part            = wire.Part
	Repository      = wire.Repository
	RepoEntry       = wire.RepoEntry
	Snapshot        = wire.Snapshot
	ActiveRun       = wire.ActiveRun
	Thread          = wire.Thread
	ThreadPage      = wire.ThreadPage
	RunInfo         = wire.RunInfo
	Model           = wire.Model
	Tool            = wire.Tool
	Limits          = wire.Limits
	Attachment      = wire.Attachment
	RunRequest      = wire.RunRequest
	NewMessage      = wire.NewMessage
	AttachmentRef   = wire.AttachmentRef
	RunConfig       = wire.RunConfig
	ToolSpec        = wire.ToolSpec
	ToolResult      = wire.ToolResult
	Approval        = wire.Approval
)
