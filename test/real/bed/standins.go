package bed

// What gpunode calls on a k3s node besides its files: `k3s ctr`, `k3s
// kubectl` and systemctl. k3s's ctr defaults to k3s's socket and the k8s.io
// namespace (FACTS.md); its kubectl to /etc/rancher/k3s/k3s.yaml.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// K3s runs `k3s ctr` or `k3s kubectl`.
func K3s(args []string) (int, error) {
	if len(args) == 0 {
		return 2, fmt.Errorf("usage: k3s ctr|kubectl ARGS")
	}
	var argv, env []string
	switch args[0] {
	case "ctr":
		bin, err := componentsBin()
		if err != nil {
			return 1, err
		}
		argv = append([]string{filepath.Join(bin, "ctr")}, args[1:]...)
		env = []string{"CONTAINERD_ADDRESS=" + containerdSocket}
		if os.Getenv("CONTAINERD_NAMESPACE") == "" {
			env = append(env, "CONTAINERD_NAMESPACE=k8s.io")
		}
	case "kubectl":
		path, err := exec.LookPath("kubectl")
		if err != nil {
			return 1, err
		}
		argv = append([]string{path}, args[1:]...)
		if os.Getenv("KUBECONFIG") == "" {
			env = []string{"KUBECONFIG=" + AdminKubeconfig}
		}
	default:
		return 1, fmt.Errorf("the bed's k3s has no %q command (ctr, kubectl)", args[0])
	}
	return 0, syscall.Exec(argv[0], argv, append(os.Environ(), env...))
}

// componentsBin finds the components' binaries beside this executable's
// original (the node copies realbed into /usr/local/bin; the spec says
// where the rest are).
func componentsBin() (string, error) {
	b, err := os.ReadFile("/run/realbed/bin")
	if err != nil {
		return "", fmt.Errorf("not on a node of the bed (%v)", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Systemctl asks the node process to act on the node's k3s unit.
func Systemctl(args []string) (int, error) {
	if len(args) != 2 {
		return 2, fmt.Errorf("the bed's systemctl takes VERB UNIT (restart, start, stop, is-active)")
	}
	c, err := net.DialTimeout("unix", ControlSocket, 5*time.Second)
	if err != nil {
		return 1, fmt.Errorf("System has not been booted with the bed's node process (%v)", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	fmt.Fprintf(c, "%s %s\n", args[0], args[1])
	line, _ := bufio.NewReader(c).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "ok"):
		if args[0] == "is-active" {
			fmt.Println("active")
		}
		return 0, nil
	case line == "error: inactive":
		fmt.Println("inactive")
		return 3, nil
	case strings.Contains(line, "not found"):
		return 5, fmt.Errorf("%s", strings.TrimPrefix(line, "error: "))
	}
	return 1, fmt.Errorf("%s", strings.TrimPrefix(line, "error: "))
}
