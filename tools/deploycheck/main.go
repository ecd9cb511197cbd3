// Command deploycheck generates the Prometheus Operator objects of deploy/ from the
// Prometheus files they mirror, and its tests decode every Kubernetes object of deploy/
// strictly against the real Go types (Kubernetes' and the Operator's: unknown fields are
// errors), after kustomize has built them as `kubectl apply -k` would. It is a module of
// its own, so none of those types reach gorping's go.mod.
//
//	go run . -root ../..   (make deploy-update: rewrite the generated files)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", "../..", "the gorping source tree")
	flag.Parse()
	files, err := Generate(*root)
	if err == nil {
		for name, data := range files {
			if err = os.WriteFile(filepath.Join(*root, name), data, 0o644); err != nil {
				break
			}
			fmt.Println(name)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploycheck: %v\n", err)
		os.Exit(1)
	}
}
