package bed

// The node process: k3s's part on one node of the bed. It runs in a mount
// and network namespace of its own (the harness starts it so), lays the
// node out, and supervises the node's services as k3s does: on a server the
// datastore (kine over SQLite, as k3s), kube-apiserver, kube-controller-
// manager and kube-scheduler; on every node containerd and the kubelet. It
// answers the k3s stand-in's systemctl on a socket: a restart renders
// containerd's config again and imports the images folder, as k3s's start
// does. A restart keeps the control plane running (k3s restarts it too; the
// rules under test do not depend on it, and it saves the apiserver's start).

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ControlSocket is where the node process listens, inside the node.
const ControlSocket = "/run/realbed/control.sock"

const containerdSocket = "/run/k3s/containerd/containerd.sock"

type service struct {
	name string
	argv []string
	cmd  *exec.Cmd
	done chan struct{}
}

type node struct {
	spec    NodeSpec
	mu      sync.Mutex
	control []*service // the control plane (servers)
	agent   []*service // containerd and the kubelet
	agentUp bool
	logDir  string
	pathEnv string
}

// RunNode is the node process's main. It expects to be in fresh mount and
// network namespaces, and reads one byte on fd 3 once the harness has given
// it its network.
func RunNode(spec NodeSpec) error {
	n := &node{spec: spec, logDir: filepath.Join(spec.Dir, "logs")}
	n.pathEnv = "PATH=" + spec.Bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// Orphaned shims and containers come back to this process, so that
	// stopping the node stops them all.
	if err := prctlSubreaper(); err != nil {
		return err
	}
	ready := os.NewFile(3, "ready")
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		return fmt.Errorf("waiting for the network: %w", err)
	}
	ready.Close()
	if err := os.MkdirAll(n.logDir, 0o755); err != nil {
		return err
	}
	if err := makeNodeMounts(spec); err != nil {
		return err
	}
	if err := layNodeFiles(spec); err != nil {
		return err
	}
	if err := makeCgroupRoot(spec.Name); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if spec.Server {
		if err := n.startControlPlane(); err != nil {
			n.stopAll()
			return err
		}
	}
	if err := n.startAgent(); err != nil {
		n.stopAll()
		return err
	}
	if err := writeFile("/run/realbed/bin", spec.Bin+"\n", 0o644); err != nil {
		n.stopAll()
		return err
	}
	l, err := listenControl()
	if err != nil {
		n.stopAll()
		return err
	}
	go n.serve(l)
	if err := writeFile(filepath.Join(spec.Dir, "up"), "", 0o644); err != nil {
		return err
	}
	<-sigs
	l.Close()
	n.stopAll()
	return nil
}

func (n *node) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "realbed %s: %s\n", n.spec.Name, fmt.Sprintf(format, args...))
}

func (n *node) start(name string, argv ...string) (*service, error) {
	f, err := os.OpenFile(filepath.Join(n.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A test's own flags for this service come last, so they win.
	argv = append(argv, n.spec.ExtraArgs[name]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), n.pathEnv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &service{name: name, argv: argv, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	return s, nil
}

func (s *service) stop(grace time.Duration) {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (n *node) bin(name string) string { return filepath.Join(n.spec.Bin, name) }

func (n *node) startControlPlane() error {
	tls := serverTLS
	db := "/var/lib/rancher/k3s/server/db"
	if err := os.MkdirAll(db, 0o700); err != nil {
		return err
	}
	kine, err := n.start("kine", n.bin("kine"),
		"--endpoint", "sqlite://"+db+"/state.db?_journal=WAL&cache=shared&_busy_timeout=30000",
		"--listen-address", "127.0.0.1:2379")
	if err != nil {
		return err
	}
	n.control = append(n.control, kine)
	if err := waitTCP("127.0.0.1:2379", 60*time.Second, kine); err != nil {
		return fmt.Errorf("kine: %w", err)
	}
	api, err := n.start("kube-apiserver", n.bin("k8s"), "kube-apiserver",
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port=6443",
		"--advertise-address="+n.spec.IP,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--anonymous-auth=false",
		"--allow-privileged=true",
		"--client-ca-file="+tls+"/ca.crt",
		"--tls-cert-file="+tls+"/apiserver.crt",
		"--tls-private-key-file="+tls+"/apiserver.key",
		"--kubelet-client-certificate="+tls+"/apiserver-kubelet-client.crt",
		"--kubelet-client-key="+tls+"/apiserver-kubelet-client.key",
		"--kubelet-certificate-authority="+tls+"/ca.crt",
		// k3s's choice (pkg/daemons/control/server.go): nodes are reached
		// by address, not by a name no DNS here resolves.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+tls+"/sa.pub",
		"--service-account-signing-key-file="+tls+"/sa.key",
		"--service-cluster-ip-range=10.43.0.0/16",
		"--profiling=false",
		"--v=1")
	if err != nil {
		return err
	}
	n.control = append(n.control, api)
	if err := n.waitReady("https://127.0.0.1:6443/readyz", 180*time.Second, api); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	cred := "/var/lib/rancher/k3s/server/cred"
	cm, err := n.start("kube-controller-manager", n.bin("k8s"), "kube-controller-manager",
		"--kubeconfig="+cred+"/controller-manager.kubeconfig",
		"--authentication-kubeconfig="+cred+"/controller-manager.kubeconfig",
		"--authorization-kubeconfig="+cred+"/controller-manager.kubeconfig",
		"--service-account-private-key-file="+tls+"/sa.key",
		"--root-ca-file="+tls+"/ca.crt",
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--controllers=*,-nodeipam,-service-lb-controller,-route",
		"--bind-address=127.0.0.1", "--secure-port=10257",
		"--v=1")
	if err != nil {
		return err
	}
	n.control = append(n.control, cm)
	sched, err := n.start("kube-scheduler", n.bin("k8s"), "kube-scheduler",
		"--kubeconfig="+cred+"/scheduler.kubeconfig",
		"--authentication-kubeconfig="+cred+"/scheduler.kubeconfig",
		"--authorization-kubeconfig="+cred+"/scheduler.kubeconfig",
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=10259",
		"--v=1")
	if err != nil {
		return err
	}
	n.control = append(n.control, sched)
	return nil
}

// startAgent is k3s's agent start: render containerd's config, start
// containerd, import the images folder, start the kubelet.
func (n *node) startAgent() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := RenderContainerdConfig("/"); err != nil {
		return err
	}
	ctrd, err := n.start("containerd", n.bin("containerd"),
		"--config", containerdDir+"/config.toml")
	if err != nil {
		return err
	}
	if err := waitUnix(containerdSocket, 60*time.Second, ctrd); err != nil {
		ctrd.stop(10 * time.Second)
		return fmt.Errorf("containerd: %w", err)
	}
	if err := n.preloadImages(); err != nil {
		ctrd.stop(10 * time.Second)
		return err
	}
	args := []string{n.bin("k8s"), "kubelet",
		"--config=" + agentDir + "/kubelet-config.yaml",
		"--kubeconfig=" + KubeletKubeconfig,
		"--hostname-override=" + n.spec.Name,
		"--node-ip=" + n.spec.IP,
		"--v=1"}
	kubelet, err := n.start("kubelet", args...)
	if err != nil {
		ctrd.stop(10 * time.Second)
		return err
	}
	n.agent = []*service{ctrd, kubelet}
	n.agentUp = true
	return nil
}

// preloadImages is k3s's PreloadImages (pkg/agent/containerd/containerd.go):
// clear the k3s pins, then import every archive of the images folder and
// pin what it held with both labels.
func (n *node) preloadImages() error {
	ctr := func(args ...string) ([]byte, error) {
		cmd := exec.Command(n.bin("ctr"), append([]string{"--address", containerdSocket, "-n", "k8s.io"}, args...)...)
		cmd.Env = append(os.Environ(), n.pathEnv)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output() // stdout only: ctr warns on stderr (cgroup v1)
		if err != nil {
			return []byte(stderr.String()), err
		}
		return out, nil
	}
	out, err := ctr("images", "ls", "-q", "labels.\"io.cattle.k3s.pinned\"==pinned")
	if err != nil {
		return fmt.Errorf("ctr images ls: %v: %s", err, out)
	}
	for _, ref := range strings.Fields(string(out)) {
		if o, err := ctr("images", "label", ref, "io.cattle.k3s.pinned=", "io.cri-containerd.pinned="); err != nil {
			return fmt.Errorf("ctr images label %s: %v: %s", ref, err, o)
		}
	}
	files, _ := filepath.Glob(ImagesDir + "/*.tar")
	for _, f := range files {
		o, err := ctr("images", "import", "--label", "io.cattle.k3s.pinned=pinned",
			"--label", "io.cri-containerd.pinned=pinned", f)
		if err != nil {
			return fmt.Errorf("import %s: %v: %s", f, err, o)
		}
	}
	return nil
}

func (n *node) stopAgent() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.agent) - 1; i >= 0; i-- {
		n.agent[i].stop(30 * time.Second)
	}
	n.agent = nil
	n.agentUp = false
}

// stopAll stops the services, then every process left below this one (the
// shims and the pods' processes, which the subreaper collected).
func (n *node) stopAll() {
	if len(n.agent) > 1 {
		n.agent[1].stop(30 * time.Second) // the kubelet first
	}
	killDescendants(os.Getpid(), func(pid int) bool {
		for _, s := range n.control {
			if s.cmd.Process != nil && s.cmd.Process.Pid == pid {
				return true // the control plane last
			}
		}
		for _, s := range n.agent {
			if s.cmd.Process != nil && s.cmd.Process.Pid == pid {
				return true
			}
		}
		return false
	})
	n.stopAgent()
	for i := len(n.control) - 1; i >= 0; i-- {
		n.control[i].stop(30 * time.Second)
	}
	killDescendants(os.Getpid(), func(int) bool { return false })
	removeCgroupRoot(n.spec.Name)
}

func listenControl() (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(ControlSocket), 0o700); err != nil {
		return nil, err
	}
	return net.Listen("unix", ControlSocket)
}

// serve answers the stand-in systemctl: one line "VERB UNIT", one line back
// "ok" or an error, as systemctl's exit status.
func (n *node) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			f := strings.Fields(line)
			if len(f) != 2 {
				fmt.Fprintln(c, "error: bad request")
				return
			}
			fmt.Fprintln(c, n.handle(f[0], strings.TrimSuffix(f[1], ".service")))
		}()
	}
}

func (n *node) handle(verb, unit string) string {
	if unit != n.spec.Unit() {
		return fmt.Sprintf("error: Unit %s.service not found.", unit)
	}
	switch verb {
	case "restart", "start", "stop":
		if verb != "start" {
			n.stopAgent()
		}
		if verb != "stop" {
			if err := n.startAgent(); err != nil {
				return "error: " + err.Error()
			}
		}
		return "ok"
	case "is-active":
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.agentUp && !n.agent[0].exited() && !n.agent[1].exited() {
			return "ok active"
		}
		return "error: inactive"
	}
	return "error: verb " + verb + " is not supported by the bed's systemctl"
}

func waitTCP(addr string, limit time.Duration, s *service) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if s.exited() {
			return fmt.Errorf("exited (%v)", s.cmd.ProcessState)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after %v", addr, limit)
}

func waitUnix(path string, limit time.Duration, s *service) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if s.exited() {
			return fmt.Errorf("exited (%v)", s.cmd.ProcessState)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no socket %s after %v", path, limit)
}

// waitReady polls the apiserver's readyz as the admin.
func (n *node) waitReady(url string, limit time.Duration, s *service) error {
	p := &PKI{Dir: n.spec.PKI}
	cert, err := tls.LoadX509KeyPair(p.Path("admin.crt"), p.Path("admin.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(p.Path("ca.crt"))
	if err != nil {
		return err
	}
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if s.exited() {
			return fmt.Errorf("exited (%v)", s.cmd.ProcessState)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v", url, limit)
}

// killDescendants SIGKILLs every process below pid, except those keep
// names, until none is left.
func killDescendants(pid int, keep func(int) bool) {
	for round := 0; round < 50; round++ {
		children := descendants(pid)
		killed := 0
		for _, c := range children {
			if !keep(c) {
				_ = syscall.Kill(c, syscall.SIGKILL)
				killed++
			}
		}
		if killed == 0 {
			return
		}
		// Reap what this process inherited as subreaper.
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func descendants(root int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parent[pid] = pp
		}
	}
	var out []int
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
