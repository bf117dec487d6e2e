package bed

// What gpunode calls on a k3s node besides its files: `k3s ctr`, `k3s
// kubectl` and systemctl. k3s's ctr defaults to k3s's socket and the k8s.io
// namespace (FACTS.md); its kubectl to /etc/rancher/k3s/k3s.yaml.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// Runc is Debian's runc, with one field of the OCI spec raised where this
// machine refuses it. These machines withhold CAP_SYS_RESOURCE from root
// (CapEff 000001fffeffffff), so no process may lower its oom_score_adj, and
// runc fails every pod sandbox (containerd's CRI gives sandboxes -998) with
// "failed to update /proc/self/oom_score_adj: Permission denied" and then
// "can't get final child's PID from pipe: EOF". On `create`, a
// process.oomScoreAdj below this process's own is raised to it; nothing
// else changes. The node's PATH finds this runc first (/usr/local/sbin),
// for containerd's runc shim and for the nvidia runtime alike.
func Runc(args []string) (int, error) {
	const real = "/usr/sbin/runc"
	bundle := ""
	creating := false
	for i, a := range args {
		switch {
		case a == "create" || a == "run":
			creating = true
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			bundle = args[i+1]
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		}
	}
	if creating && bundle != "" {
		if err := raiseOOMScoreAdj(filepath.Join(bundle, "config.json")); err != nil {
			return 1, err
		}
	}
	return 0, syscall.Exec(real, append([]string{real}, args...), os.Environ())
}

func raiseOOMScoreAdj(path string) error {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return err
	}
	floor, err := strconv.Atoi(strings.TrimSpace(string(own)))
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	process, _ := spec["process"].(map[string]any)
	adj, ok := process["oomScoreAdj"].(float64)
	if !ok || int(adj) >= floor {
		return nil
	}
	process["oomScoreAdj"] = floor
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := path + ".realbed"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
