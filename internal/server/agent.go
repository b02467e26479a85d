package server

import (
	"context"
	"sync"
)

// AgentOptions configure the in-process node agent (`kube server --agent`, internal/agent).
type AgentOptions struct{}

func (o *AgentOptions) validate() error { return nil }

// startAgent starts the in-process node agent when asked for; it stops when ctx ends and wg
// tracks it.
func (s *Server) startAgent(ctx context.Context, wg *sync.WaitGroup) error { return nil }
