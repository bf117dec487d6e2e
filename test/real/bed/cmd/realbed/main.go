// Command realbed is the real tier's node process and the k3s stand-ins a
// node carries, chosen by the name it runs under:
//
//	realbed node SPEC.json   a node of the bed (the harness starts it)
//	k3s ctr ARGS             containerd's ctr on the node's containerd
//	k3s kubectl ARGS         kubectl with k3s's admin kubeconfig
//	systemctl VERB UNIT      restart, start, stop or is-active the node's k3s
//	runc ARGS                Debian's runc, with what this machine refuses raised
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"gpunode.test/real/bed"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "realbed" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var err error
	code := 0
	switch name {
	case "node":
		err = runNode(args)
	case "k3s":
		code, err = bed.K3s(args)
	case "systemctl":
		code, err = bed.Systemctl(args)
	case "runc":
		code, err = bed.Runc(args)
	default:
		err = fmt.Errorf("usage: realbed node SPEC.json | k3s ctr|kubectl ... | systemctl VERB UNIT")
		code = 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func runNode(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: realbed node SPEC.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var spec bed.NodeSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	return bed.RunNode(spec)
}
