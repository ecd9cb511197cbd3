package cli

import (
	"context"

	"github.com/gorping/gorping/mesh"
)

// meshCommand is `gorping mesh`, the agent (package mesh runs it).
func meshCommand() *subcommand {
	return &subcommand{
		name:      "mesh",
		help:      "ping mesh agent exporting to Prometheus",
		synopsis:  "mesh [options]",
		options:   meshOptions(),
		usageText: mesh.Usage,
		daemon:    true,
		schedule:  mesh.Schedule,
		run: func(ctx context.Context, w words, env Env) int {
			return mesh.Main(ctx, w.raw, env.Version, env.Stdout, env.Stderr)
		},
	}
}

// meshOptions are mesh's options as the table lists them (mesh parses its own).
func meshOptions() []option {
	var opts []option
	for _, f := range mesh.Flags() {
		if f.Name == "h" || f.Name == "help" {
			continue
		}
		o := option{long: f.Name, help: "see gorping mesh --help"}
		if f.Value {
			o.arg = "value"
		}
		opts = append(opts, o)
	}
	return append(opts, helpOption)
}
