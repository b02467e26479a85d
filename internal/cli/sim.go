package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// simCommands are the top-level commands of the sim area (filled in by its issue).
func simCommands(out, errOut io.Writer) []*cobra.Command { return nil }
