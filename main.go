// Command gorping is a pure-Go drop-in replacement for rdma-core's rping.
package main

import "os"

func main() { os.Exit(run(os.Args[1:])) }

// run is a placeholder until the CLI lands.
func run(args []string) int { return 22 }
