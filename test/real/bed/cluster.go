package bed

// The harness: a cluster of nodes on this machine, each a node process in
// mount, network and UTS namespaces of its own, joined by a bridge
// (realbed0, 10.211.0.1/24) in the machine's network namespace. The server
// is 10.211.0.10, the next nodes .11, .12 and so on.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// NodeOptions is one node a test asks for.
type NodeOptions struct {
	Name      string
	Server    bool
	GPUs      int
	ExtraArgs map[string][]string // more flags, by service (NodeSpec.ExtraArgs)
}

// Options says where the parts are and which nodes to start.
type Options struct {
	Dir      string // everything the cluster writes; removed by Stop
	Bin      string // the components (test/real/build-components.sh)
	Stubs    string // libnvidia-ml.so.1, libcuda.so.1 (build/test/stub-driver)
	Fixtures string // test/fixtures
	Nodes    []NodeOptions
}

// Node is a started node.
type Node struct {
	Spec NodeSpec
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is a started cluster.
type Cluster struct {
	Opts       Options
	Nodes      []*Node
	Kubeconfig string // the admin's, on the machine (server at 10.211.0.10)
	machine    *os.File
}

const bridgeName = "realbed0"

// machineLock is held while a cluster exists: the bridge, its addresses and
// the nodes' veth names are the machine's, so a second cluster (another
// checkout's tests beside CI's) waits for the first instead of deleting its
// bridge under it (the independent try of issue 25 did exactly that).
const machineLock = "/run/gpunode-realbed.lock"

func lockMachine() (*os.File, error) {
	f, err := os.OpenFile(machineLock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == syscall.EWOULDBLOCK {
		fmt.Fprintf(os.Stderr, "realbed: another real-tier cluster runs on this machine (%s): waiting for it\n", machineLock)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != nil {
			f.Close()
			return nil, err
		}
	} else if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Start brings the cluster up and waits until every node is Ready.
func Start(o Options) (*Cluster, error) {
	machine, err := lockMachine()
	if err != nil {
		return nil, fmt.Errorf("the machine's real-tier lock: %w", err)
	}
	c := &Cluster{Opts: o, machine: machine}
	started := false
	defer func() {
		if !started && c.machine != nil { // an early return: no Stop
			c.machine.Close()
			c.machine = nil
		}
	}()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	var server string
	for i, n := range o.Nodes {
		if n.Server {
			server = fmt.Sprintf("10.211.0.%d", 10+i)
		}
	}
	if server == "" {
		return nil, fmt.Errorf("no server among the nodes")
	}
	pki, err := c.makePKI(server)
	if err != nil {
		return nil, err
	}
	admin, err := pki.Kubeconfig("admin", "https://"+server+":6443")
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(o.Dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(admin), 0o600); err != nil {
		return nil, err
	}
	_ = run("ip", "link", "del", bridgeName) // a crashed run's: the lock is ours
	if err := run("ip", "link", "add", bridgeName, "type", "bridge"); err != nil {
		c.Stop()
		return nil, err
	}
	if err := run("ip", "addr", "add", "10.211.0.1/24", "dev", bridgeName); err != nil {
		c.Stop()
		return nil, err
	}
	if err := run("ip", "link", "set", bridgeName, "up"); err != nil {
		c.Stop()
		return nil, err
	}
	// The server first: the agents' kubelets register with it.
	order := make([]int, 0, len(o.Nodes))
	for i, n := range o.Nodes {
		if n.Server {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	for k, i := range order {
		n := o.Nodes[i]
		spec := NodeSpec{Name: n.Name, Server: n.Server, GPUs: n.GPUs, Index: i,
			IP: fmt.Sprintf("10.211.0.%d", 10+i), ServerIP: server,
			Dir: filepath.Join(o.Dir, "nodes", n.Name), Bin: o.Bin, PKI: pki.Dir,
			Stubs: o.Stubs, Fixtures: o.Fixtures, ExtraArgs: n.ExtraArgs}
		node, err := c.startNode(spec)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
		if k == 0 {
			if err := node.waitUp(4 * time.Minute); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	for _, n := range c.Nodes {
		if err := n.waitUp(3 * time.Minute); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(n.Spec.Name, 3*time.Minute); err != nil {
			c.Stop()
			return nil, err
		}
		// k3s's server labels its own node's role (a kubelet may not set
		// node-role.kubernetes.io labels: NodeRestriction).
		if n.Spec.Server {
			if _, err := c.Kubectl("label", "node", n.Spec.Name, "node-role.kubernetes.io/control-plane=true"); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	started = true
	return c, nil
}

func (c *Cluster) makePKI(server string) (*PKI, error) {
	p, err := NewPKI(filepath.Join(c.Opts.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	issue := []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		{"admin", "system:admin", []string{"system:masters"}, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
		{"apiserver-kubelet-client", "system:kube-apiserver", []string{"system:masters"}, nil},
		// The node stand-in of the scale benchmark (fleet.go): an identity
		// of its own, so that the API's audit log tells its requests apart.
		{"fleet", "realbed-fleet", []string{"system:masters"}, nil},
		{"apiserver", "kube-apiserver", nil, []string{"127.0.0.1", server, "10.43.0.1", "localhost",
			"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
	}
	for i, n := range c.Opts.Nodes {
		ip := fmt.Sprintf("10.211.0.%d", 10+i)
		issue = append(issue,
			struct {
				name, cn string
				orgs     []string
				hosts    []string
			}{"node-" + n.Name, "system:node:" + n.Name, []string{"system:nodes"}, nil},
			struct {
				name, cn string
				orgs     []string
				hosts    []string
			}{"serving-" + n.Name, n.Name, nil, []string{n.Name, ip}})
	}
	for _, i := range issue {
		if err := p.Issue(i.name, i.cn, i.orgs, i.hosts...); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (c *Cluster) startNode(spec NodeSpec) (*Node, error) {
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, err
	}
	specPath := filepath.Join(spec.Dir, "spec.json")
	b, _ := json.MarshalIndent(spec, "", "  ")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(spec.Dir, "node.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(filepath.Join(c.Opts.Bin, "realbed"), "node", specPath)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGTERM,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node %s: %w", spec.Name, err)
	}
	n := &Node{Spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }()
	pid := fmt.Sprint(cmd.Process.Pid)
	host := fmt.Sprintf("rb%d", spec.Index)
	in := func(argv ...string) error {
		return run(append([]string{"nsenter", "--target", pid, "--net", "--uts"}, argv...)...)
	}
	steps := [][]string{
		{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"ip", "link", "set", host, "master", bridgeName, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			n.stop()
			return nil, err
		}
	}
	for _, s := range [][]string{
		{"hostname", spec.Name},
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", spec.IP + "/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "via", "10.211.0.1"},
	} {
		if err := in(s...); err != nil {
			n.stop()
			return nil, err
		}
	}
	if _, err := w.Write([]byte{1}); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) waitUp(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(n.Spec.Dir, "up")); err == nil {
			return nil
		}
		select {
		case <-n.done:
			return fmt.Errorf("node %s exited while starting; its log:\n%s", n.Spec.Name, n.Tail("node.log", 40))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s not up after %v; its log:\n%s", n.Spec.Name, limit, n.Tail("node.log", 40))
}

// Tail is the last lines of one of the node's logs (node.log, or
// logs/SERVICE.log).
func (n *Node) Tail(log string, lines int) string {
	b, _ := os.ReadFile(filepath.Join(n.Spec.Dir, log))
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (n *Node) stop() { stopGroup(n.cmd, n.done, 2*time.Minute) }

// stopGroup ends a process started in a group of its own (Setpgid): SIGTERM,
// and after grace SIGKILL to the whole group; done closes when it is reaped.
func stopGroup(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Stop stops every node (agents first), removes the network, and the
// cluster's files unless keep is set (GPUNODE_REAL_KEEP=1 keeps them for a
// look after a failure).
func (c *Cluster) Stop() {
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		if !c.Nodes[i].Spec.Server {
			c.Nodes[i].stop()
		}
	}
	for _, n := range c.Nodes {
		if n.Spec.Server {
			n.stop()
		}
	}
	_ = run("ip", "link", "del", bridgeName)
	if os.Getenv("GPUNODE_REAL_KEEP") != "1" {
		_ = os.RemoveAll(c.Opts.Dir)
	}
	if c.machine != nil {
		c.machine.Close() // releases the flock
		c.machine = nil
	}
}

// Kubectl runs kubectl as the admin, from the machine.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", c.Kubeconfig, "--request-timeout=30s"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (c *Cluster) waitNodeReady(name string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		out, err := c.Kubectl("get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && out == "True" {
			return nil
		}
		last = out
		if err != nil {
			last = err.Error()
		}
		if log := c.Node(name).Tail("logs/kubelet.log", 5); strings.Contains(log, `"command failed"`) {
			break // the kubelet exited: no use waiting
		}
		time.Sleep(time.Second)
	}
	node := c.Node(name)
	return fmt.Errorf("node %s not Ready after %v (%s); kubelet log:\n%s", name, limit, last, node.Tail("logs/kubelet.log", 30))
}

// Node is the node of that name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Spec.Name == name {
			return n
		}
	}
	return nil
}

// Command is argv run on the node: in its mount, network and UTS
// namespaces, as root on that node would run it.
func (n *Node) Command(env []string, argv ...string) *exec.Cmd {
	pid := fmt.Sprint(n.cmd.Process.Pid)
	args := append([]string{"--target", pid, "--mount", "--net", "--uts", "--wd=/", "--"}, argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "LANG=C.UTF-8",
		fmt.Sprintf("GPUNODE_STUB_NVML_GPUS=%d", n.Spec.GPUs),
		fmt.Sprintf("GPUNODE_SIM_GPU_COUNT=%d", n.Spec.GPUs)}, env...)
	return cmd
}
