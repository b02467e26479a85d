package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// agentCommands are the top-level commands of the agent area (filled in by its issue).
func agentCommands(out, errOut io.Writer) []*cobra.Command { return nil }
