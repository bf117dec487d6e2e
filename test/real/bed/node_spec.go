package bed

// NodeSpec is one node of the bed: what the harness hands the node process.
type NodeSpec struct {
	Name     string `json:"name"`
	Server   bool   `json:"server"`    // runs the control plane too (k3s.service)
	IP       string `json:"ip"`        // eth0's address in the node's network namespace
	ServerIP string `json:"server_ip"` // where the apiserver listens
	GPUs     int    `json:"gpus"`      // 0: a CPU-only node (no driver, no NVML)
	Index    int    `json:"index"`     // this node's pod subnet is 10.42.INDEX.0/24
	Dir      string `json:"dir"`       // the node's own files, outside the namespace
	Bin      string `json:"bin"`       // the components' binaries
	PKI      string `json:"pki"`       // the cluster's certificates
	Stubs    string `json:"stubs"`     // libnvidia-ml.so.1 and libcuda.so.1 stand-ins
	Fixtures string `json:"fixtures"`  // test/fixtures
	// More flags for a service, by its name (kube-apiserver,
	// kube-controller-manager, ...): a benchmark's settings.
	ExtraArgs map[string][]string `json:"extra_args,omitempty"`
}

// Unit is the systemd unit k3s installs for this node's role.
func (s NodeSpec) Unit() string {
	if s.Server {
		return "k3s"
	}
	return "k3s-agent"
}

// The apiserver's address as the host and the other nodes reach it.
func (s NodeSpec) APIServer() string { return "https://" + s.ServerIP + ":6443" }
